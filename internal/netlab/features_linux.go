//go:build linux

package netlab

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Offload features SetFeature knows by name, as "ethtool -k" lists them.
const (
	// FeatureUDPSegmentation is UDP GSO on transmit (NETIF_F_GSO_UDP_L4):
	// off, the kernel cuts a GSO train into datagrams as it leaves the
	// device, as a NIC does in hardware.
	FeatureUDPSegmentation = "tx-udp-segmentation"
	// FeatureGRO is generic receive offload (NETIF_F_GRO): on a veth it
	// also turns on the NAPI receive path, which coalesces the datagrams
	// of a flow for a UDP_GRO socket, as a NIC driver does.
	FeatureGRO = "rx-gro"
)

const (
	ethSSFeatures  = 4  // ETH_SS_FEATURES
	ethGStringLen  = 32 // ETH_GSTRING_LEN
	ethtoolFUnsupp = 1 << 0
	ethtoolFWish   = 1 << 1
)

// SetFeature turns the offload feature name of interface dev, in the
// network namespace of the calling thread (inside Host.Do, the host's),
// on or off, as "ethtool -K dev name on|off" does, through the
// SIOCETHTOOL ioctl so that the lab needs no ethtool command. It refuses
// to run outside the lab, and fails when the device cannot take the
// requested state.
func SetFeature(dev, name string, on bool) error {
	if !Inside() {
		return errors.New("netlab: refusing to change a device outside the lab")
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("netlab: features of %s: %w", dev, err)
	}
	defer unix.Close(fd)
	// How many feature names there are.
	info := make([]byte, 4+4+8+4)
	binary.NativeEndian.PutUint32(info[0:], unix.ETHTOOL_GSSET_INFO)
	binary.NativeEndian.PutUint64(info[8:], 1<<ethSSFeatures)
	if _, err := ethtool(fd, dev, info); err != nil {
		return fmt.Errorf("netlab: feature names of %s: %w", dev, err)
	}
	n := int(binary.NativeEndian.Uint32(info[16:]))
	// The names, ETH_GSTRING_LEN bytes each; the index of ours is its bit.
	strs := make([]byte, 12+n*ethGStringLen)
	binary.NativeEndian.PutUint32(strs[0:], unix.ETHTOOL_GSTRINGS)
	binary.NativeEndian.PutUint32(strs[4:], ethSSFeatures)
	binary.NativeEndian.PutUint32(strs[8:], uint32(n))
	if _, err := ethtool(fd, dev, strs); err != nil {
		return fmt.Errorf("netlab: feature names of %s: %w", dev, err)
	}
	bit := -1
	for i := range n {
		s := strs[12+i*ethGStringLen : 12+(i+1)*ethGStringLen]
		if string(bytes.TrimRight(s, "\x00")) == name {
			bit = i
			break
		}
	}
	if bit < 0 {
		return fmt.Errorf("netlab: %s has no feature %q", dev, name)
	}
	// struct ethtool_sfeatures: cmd, size (blocks), then {valid, requested}
	// per 32 features.
	blocks := (n + 31) / 32
	sf := make([]byte, 8+8*blocks)
	binary.NativeEndian.PutUint32(sf[0:], unix.ETHTOOL_SFEATURES)
	binary.NativeEndian.PutUint32(sf[4:], uint32(blocks))
	blk := 8 + 8*(bit/32)
	mask := uint32(1) << (bit % 32)
	binary.NativeEndian.PutUint32(sf[blk:], mask)
	if on {
		binary.NativeEndian.PutUint32(sf[blk+4:], mask)
	}
	ret, err := ethtool(fd, dev, sf)
	switch {
	case err != nil:
		return fmt.Errorf("netlab: set %s %s: %w", dev, name, err)
	case ret&ethtoolFUnsupp != 0:
		return fmt.Errorf("netlab: %s cannot change %s", dev, name)
	case ret&ethtoolFWish != 0:
		return fmt.Errorf("netlab: %s did not take %s %v", dev, name, on)
	}
	return nil
}

// ethtool makes the SIOCETHTOOL ioctl on dev with data (its first field
// is the command) and returns the ioctl's result.
func ethtool(fd int, dev string, data []byte) (int, error) {
	var ifr struct {
		name [unix.IFNAMSIZ]byte
		data unsafe.Pointer
		_    [16]byte // the rest of struct ifreq's union
	}
	if len(dev) >= unix.IFNAMSIZ {
		return 0, fmt.Errorf("interface name %q too long", dev)
	}
	copy(ifr.name[:], dev)
	ifr.data = unsafe.Pointer(&data[0])
	r, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	runtime.KeepAlive(data)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}
