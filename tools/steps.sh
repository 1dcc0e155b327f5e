#!/usr/bin/env bash
# steps.sh runs make test's steps and ends with a table of what each took,
# so a log (CI's too) says where the time went; TIMINGS=file also writes
# the table as JSON, and SAVE=1 saves a passing run's table as
# docs/results/make-test.md (stack/cmd/save-result). Each argument is a step, a make target; a+b+c runs
# those targets side by side, two at a time, each one's output held back
# and printed whole once it ends, so logs do not interleave. Only work that
# measures no time goes side by side: on a 2-core machine anything that
# calibrates load or times alerts must have the CPU to itself.
#
# Usage: tools/steps.sh tools check+plugin+check-rules load e2e
set -uo pipefail

MAKE=${MAKE:-make}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
# Side by side steps run in the background, where a non-interactive shell
# ignores SIGINT: each runs in a process group of its own (set -m), and on
# Ctrl-C or TERM the groups are stopped rather than orphaned.
set -m
stop() {
	local p
	for p in $(jobs -p); do kill -TERM -- "-$p" 2>/dev/null; done
	exit 130
}
trap stop INT TERM
began=$(date +%s.%N)
rows=() # name|group|started (s after the start)|seconds|result
failed=0

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", b - a }'; }

# one runs a target; its output goes to $2 when given, else straight out.
one() {
	local target=$1 out=${2:-} group=${3:-alone} t0 rc
	t0=$(now)
	if [ -n "$out" ]; then
		$MAKE --no-print-directory "$target" >"$out" 2>&1
	else
		$MAKE --no-print-directory "$target"
	fi
	rc=$?
	echo "$target|$group|$(secs "$began" "$t0")|$(secs "$t0" "$(now)")|$([ $rc = 0 ] && echo ok || echo "FAILED ($rc)")" >"$logs/$target.row"
	return $rc
}

# together runs targets two at a time, each printed whole as it ends.
together() {
	local group=$1 pending=() running=() t
	IFS=+ read -r -a pending <<<"$group"
	declare -A pid
	while [ ${#pending[@]} -gt 0 ] || [ ${#running[@]} -gt 0 ]; do
		while [ ${#running[@]} -lt 2 ] && [ ${#pending[@]} -gt 0 ]; do
			t=${pending[0]}
			pending=("${pending[@]:1}")
			one "$t" "$logs/$t.log" "$group" &
			pid[$t]=$!
			running+=("$t")
		done
		wait -n
		local still=()
		for t in "${running[@]}"; do
			if kill -0 "${pid[$t]}" 2>/dev/null; then
				still+=("$t")
				continue
			fi
			wait "${pid[$t]}" || failed=1
			printf '\n==== make %s (beside %s) ====\n' "$t" "${group//+/, }"
			cat "$logs/$t.log"
		done
		running=("${still[@]}")
	done
}

table() {
	local r name group start took result total
	total=$(secs "$began" "$(now)")
	printf '%-18s %8s %8s  %s\n' step started took result
	for r in "${rows[@]}"; do
		IFS='|' read -r name group start took result <<<"$r"
		printf '%-18s %8s %8s  %s%s\n' "$name" "$start" "$took" "$result" "$([ "$group" = alone ] || echo "  (beside: ${group//+/, })")"
	done
	printf '%-18s %8s %8s\n' total "" "$total"
}

# json writes the table to $TIMINGS, when set.
json() {
	local r name group start took result total
	total=$(secs "$began" "$(now)")
	if [ -n "${TIMINGS:-}" ]; then
		{
			printf '{"total_seconds": %s, "steps": [' "$total"
			local sep=""
			for r in "${rows[@]}"; do
				IFS='|' read -r name group start took result <<<"$r"
				printf '%s\n  {"step": "%s", "started_seconds": %s, "seconds": %s, "result": "%s", "beside": "%s"}' \
					"$sep" "$name" "$start" "$took" "$result" "$([ "$group" = alone ] || echo "$group")"
				sep=","
			done
			printf '\n]}\n'
		} >"$TIMINGS"
		echo "timings written to $TIMINGS"
	fi
}

save() {
	[ -n "${SAVE:-}" ] && [ $failed = 0 ] || return 0
	go run ./stack/cmd/save-result -o docs/results/make-test.md -title "Where make test's time goes" \
		-by '`make test SAVE=1` (tools/steps.sh)' \
		-note "seconds from make test's start, and each step's own; steps side by side (beside) overlap" <"$logs/table" &&
		echo "saved docs/results/make-test.md"
}

for step in "$@"; do
	if [[ $step == *+* ]]; then
		together "$step"
		for t in ${step//+/ }; do [ -f "$logs/$t.row" ] && rows+=("$(cat "$logs/$t.row")"); done
	else
		one "$step" || failed=1
		rows+=("$(cat "$logs/$step.row")")
	fi
	[ $failed = 0 ] || break
done
table >"$logs/table"
printf '\nmake test: where the time went (seconds; side by side steps overlap)\n'
cat "$logs/table"
json
save || failed=1
exit $failed
