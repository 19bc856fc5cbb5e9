package packetconn_test

import (
	"testing"

	"github.com/mdbus/mdbus/packetconn"
	"github.com/stretchr/testify/require"
)

func TestBufferKeepsFullSize(t *testing.T) {
	b := packetconn.NewBatch(3, 100)
	b.Msgs[1].Buf = b.Msgs[1].Buf[:5]
	require.Len(t, b.Buffer(1), 100)
	require.Len(t, b.Msgs[0].Buf, 100)
	require.Nil(t, b.Buffer(3))
	require.Nil(t, new(packetconn.Batch).Buffer(0))
}
