module burnlab/gateway

go 1.26.0

require (
	github.com/chzyer/readline v1.5.1 // indirect
	github.com/google/pprof v0.0.0-20261105003125-4bf881d7fb0b // indirect
	github.com/ianlancetaylor/demangle v0.0.0-20250417193237-f615e6bd150b // indirect
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/rs/zerolog v1.35.1 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
