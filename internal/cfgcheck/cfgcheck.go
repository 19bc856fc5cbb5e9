// Package cfgcheck checks the rule every mdbus Config follows for zero
// and negative values, so that each package states it once on its Config
// and checks it the same way:
//
//   - the zero value of a field means its default;
//   - a negative value means "none" or "off" only where the field's doc
//     says so (a bound or an interval that can be turned off);
//   - anywhere else a negative value is invalid: the constructor returns
//     an error that wraps the package's ErrConfig and names the field.
package cfgcheck

import "fmt"

// Field is a config field that must not be negative: its name as the
// caller writes it ("Recovery.Failover") and its value.
type Field struct {
	name string
	v    any
	neg  bool
}

// F is the field name holding v.
func F[T ~int | ~int64 | ~int32 | ~float64](name string, v T) Field {
	return Field{name: name, v: v, neg: v < 0}
}

// Negative returns an error wrapping errConfig that names the first of
// fields holding a negative value, or nil when none does.
func Negative(errConfig error, fields ...Field) error {
	for _, f := range fields {
		if f.neg {
			return fmt.Errorf("%w: %s %v: must not be negative (0: the default)", errConfig, f.name, f.v)
		}
	}
	return nil
}

// OrNone resolves a field whose doc says "negative: none": zero is def,
// a negative value none (0), anything else itself.
func OrNone[T ~int | ~int64](v, def T) T {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}
