//go:build !unix

package regfile

import "io/fs"

// Off Unix os.OpenFile has no flag that refuses a link and there are no
// FIFOs to block on; the check on the open file still refuses anything
// but a regular file.
const noFollow = 0

func notRegularOpen(error) string { return "" }

func owner(fs.FileInfo) int { return -1 }
