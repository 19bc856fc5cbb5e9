package itch_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/mdbus/mdbus/tools/itch"
)

// FuzzAppend: any bytes give one line of text and one valid JSON object,
// never a panic; a message that Check accepts decodes without "error".
func FuzzAppend(f *testing.F) {
	for _, m := range sample(f)[:40] {
		f.Add(m)
	}
	for _, typ := range itch.Types() {
		m := make([]byte, itch.Length(typ))
		m[0] = typ
		f.Add(m)
		f.Add(m[:len(m)-1])
		f.Add(append(m, 0xff, '"', '\\'))
	}
	f.Add([]byte{})
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, msg []byte) {
		txt := itch.AppendText(nil, msg)
		if bytes.ContainsAny(txt, "\n\r") {
			t.Fatalf("text has a line break: %q", txt)
		}
		js := itch.AppendJSON(nil, msg)
		var obj map[string]any
		if err := json.Unmarshal(js, &obj); err != nil {
			t.Fatalf("invalid JSON %s: %v", js, err)
		}
		_, bad := obj["error"]
		if ok := itch.Check(msg) == nil; ok == bad {
			t.Fatalf("Check %v but JSON %s", itch.Check(msg), js)
		}
	})
}
