package counters

import (
	"bytes"
	"testing"
)

// FuzzOpenCounters feeds arbitrary bytes to the reader: a counters file
// is written by another process, maybe hostile. Parse must return an
// error or a snapshot, never panic, and never report more values than the
// declared slots that fit in the input.
func FuzzOpenCounters(f *testing.F) {
	w, err := Create(Config{Off: true, Slots: 4, Interval: -1, Role: "sub", Args: []string{"mdbus", "sub"}})
	if err != nil {
		f.Fatal(err)
	}
	w.Add(SubMessages, Free, "", "sub").Set(5)
	w.Add(SubDropped, Free, "malformed", "sub/S@1.2.3.4:5").Set(1)
	valid := bytes.Clone(w.mem)
	f.Add(valid)
	f.Add(valid[:HeaderSize])
	f.Add(valid[:HeaderSize+SlotSize+7])
	f.Add([]byte(Magic))
	f.Add([]byte{})
	bad := bytes.Clone(valid)
	bad[HeaderSize+slotLabelLen] = 255 // label longer than its field
	f.Add(bad)
	huge := bytes.Clone(valid)
	le.PutUint32(huge[offNumSlots:], 1<<31) // slot count far past the data
	f.Add(huge)
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(b)
		if err != nil {
			return
		}
		if max := (len(b) - HeaderSize) / SlotSize; len(s.Values) > max || s.Slots > max {
			t.Fatalf("%d values, %d slots from %d bytes", len(s.Values), s.Slots, len(b))
		}
		for _, v := range s.Values {
			if len(v.Label) > 3*LabelLen || len(v.Owner) > 3*OwnerLen || v.Type > Gauge || v.Type == Free {
				t.Fatalf("bad value %+v", v)
			}
		}
		var out bytes.Buffer
		if err := WritePrometheus(&out, s); err != nil {
			t.Fatal(err)
		}
	})
}
