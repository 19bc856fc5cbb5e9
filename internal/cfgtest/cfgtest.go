// Package cfgtest tests a package's Config against the zero/negative rule
// that internal/cfgcheck checks: a negative value is refused with an
// error naming the field, except in the fields whose doc says
// "negative: none", and a zero value takes the default. Fields are named
// by their path from the Config, dotted ("Fetch.Wait").
package cfgtest

import (
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Refuses checks that check refuses base with each of fields set to -1,
// with an error wrapping errConfig that names the field (its last dotted
// part) followed by the negative value.
func Refuses[C any](t *testing.T, errConfig error, check func(C) error, base C, fields ...string) {
	t.Helper()
	for _, f := range fields {
		t.Run("negative "+f, func(t *testing.T) {
			err := check(negative(t, base, f))
			require.ErrorIs(t, err, errConfig)
			require.ErrorContains(t, err, f[strings.LastIndexByte(f, '.')+1:]+" -")
		})
	}
}

// Accepts checks that check accepts base with each of fields set to -1:
// the fields whose doc says a negative value means none.
func Accepts[C any](t *testing.T, check func(C) error, base C, fields ...string) {
	t.Helper()
	for _, f := range fields {
		require.NoError(t, check(negative(t, base, f)), "%s: negative means none", f)
	}
}

// Fields checks that the fields of got named by want's keys hold want's
// values (of any type the field converts to).
func Fields(t *testing.T, got any, want map[string]any) {
	t.Helper()
	v := reflect.Indirect(reflect.ValueOf(got))
	for path, w := range want {
		require.EqualValues(t, w, field(t, v, path).Interface(), path)
	}
}

func negative[C any](t *testing.T, base C, path string) C {
	t.Helper()
	v := reflect.ValueOf(&base).Elem()
	f := field(t, v, path)
	switch f.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		f.SetInt(-1)
	case reflect.Float32, reflect.Float64:
		f.SetFloat(-1)
	default:
		t.Fatalf("cfgtest: %s is a %s, which cannot be negative", path, f.Kind())
	}
	return base
}

func field(t *testing.T, v reflect.Value, path string) reflect.Value {
	t.Helper()
	for name := range strings.SplitSeq(path, ".") {
		v = reflect.Indirect(v).FieldByName(name)
		if !v.IsValid() {
			t.Fatalf("cfgtest: no field %s", path)
		}
	}
	return v
}
