package e2e

import (
	"reflect"
	"strings"
	"testing"

	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/retransmit"
	"github.com/mdbus/mdbus/subscriber"
)

// internalTypes returns the types reachable from t's exported surface
// (fields, elements, function parameters and results) that live in an
// internal package.
func internalTypes(t reflect.Type, seen map[reflect.Type]bool) []string {
	if seen[t] {
		return nil
	}
	seen[t] = true
	var out []string
	if p := t.PkgPath(); strings.Contains(p, "/internal/") || strings.HasSuffix(p, "/internal") {
		out = append(out, t.String())
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Chan:
		out = append(out, internalTypes(t.Elem(), seen)...)
	case reflect.Map:
		out = append(out, internalTypes(t.Key(), seen)...)
		out = append(out, internalTypes(t.Elem(), seen)...)
	case reflect.Func:
		for i := range t.NumIn() {
			out = append(out, internalTypes(t.In(i), seen)...)
		}
		for i := range t.NumOut() {
			out = append(out, internalTypes(t.Out(i), seen)...)
		}
	case reflect.Struct:
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() {
				out = append(out, internalTypes(f.Type, seen)...)
			}
		}
	case reflect.Interface:
		for i := range t.NumMethod() {
			out = append(out, internalTypes(t.Method(i).Type, seen)...)
		}
	}
	return out
}

// TestPublicConfigNamesNoInternalType: no exported
// configuration names a type an importer cannot name (before, the Wrap
// hooks took internal/sock.PacketConn).
func TestPublicConfigNamesNoInternalType(t *testing.T) {
	for _, v := range []any{
		subscriber.Config{}, subscriber.Stats{}, subscriber.StreamStats{}, subscriber.Message{},
		publisher.Config{}, retransmit.ServerConfig{}, retransmit.CacheConfig{}, retransmit.ServerStats{},
	} {
		typ := reflect.TypeOf(v)
		if bad := internalTypes(typ, map[reflect.Type]bool{}); len(bad) > 0 {
			t.Errorf("%v names internal types: %v", typ, bad)
		}
	}
}
