// Package join makes one rule file of what Sloth writes for several
// services. Given a spec of several YAML documents (one per service),
// Sloth writes one document of groups per service, separated by "---";
// Prometheus reads only a rule file's first document, so the other
// services' alerts would silently never load. Groups appends every later
// document's groups to the first document's list, keeping every other byte,
// so a regeneration compares with the committed file. `make rules` runs it
// straight after Sloth, before the steps that read the file as one
// document (guard, burnfacts, nodata).
package join

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"go.yaml.in/yaml/v3"
)

// separator is how Sloth starts each document after the first.
const separator = "\n---\n"

// Groups returns the rule file with its documents' groups in one list. A
// file of one document is returned as it is.
func Groups(sloth []byte) ([]byte, error) {
	// Sloth starts its first document with a separator too, after an
	// empty line: that document is the first one with groups.
	// It is kept as it is.
	docs := strings.Split(string(sloth), separator)
	lead := ""
	if strings.TrimSpace(docs[0]) == "" && len(docs) > 1 {
		lead, docs = docs[0]+separator, docs[1:]
	}
	want := 0
	dec := yaml.NewDecoder(bytes.NewReader(sloth))
	for {
		var doc map[string][]yaml.Node
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("join: reading the rule file: %w", err)
		}
		if len(doc) != 1 || doc["groups"] == nil {
			return nil, fmt.Errorf("join: a document of the rule file holds more than a list of groups")
		}
		want += len(doc["groups"])
	}
	var out strings.Builder
	out.WriteString(lead + docs[0])
	for i, d := range docs[1:] {
		// Sloth's header comments, then the list's key on a line of its
		// own: what follows is the list's items.
		_, items, ok := strings.Cut(d, "\ngroups:\n")
		if !ok {
			return nil, fmt.Errorf("join: document %d of the rule file has no groups: line", i+2)
		}
		if !strings.HasSuffix(out.String(), "\n") {
			out.WriteByte('\n')
		}
		out.WriteString(items)
	}
	var check struct{ Groups []yaml.Node }
	if err := yaml.Unmarshal([]byte(out.String()), &check); err != nil || len(check.Groups) != want {
		return nil, fmt.Errorf("join: the joined file holds %d groups, want %d (%v)", len(check.Groups), want, err)
	}
	return []byte(out.String()), nil
}
