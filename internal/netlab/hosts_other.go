//go:build !linux

package netlab

// NewHost fails: hosts are network namespaces, Linux only.
func NewHost(name string) (*Host, error) { return nil, errUnsupported }

// Do fails: there are no hosts here.
func (h *Host) Do(f func()) error { return errUnsupported }

// SetLink fails: there are no hosts here.
func (h *Host) SetLink(up bool) error { return errUnsupported }

// Close does nothing: there are no hosts here.
func (h *Host) Close() error { return nil }
