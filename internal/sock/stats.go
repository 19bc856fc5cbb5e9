package sock

// GROStats describes a socket's UDP_GRO receiving.
type GROStats struct {
	// On reports that the socket receives with UDP_GRO.
	On bool
	// Reads is the skbs received (one per train or plain datagram);
	// Datagrams is the datagrams ReadBatch handed out of them.
	// Datagrams / Reads is the average train length.
	Reads, Datagrams uint64
}

// GSOStats describes a Conn's use of UDP GSO (Config.GSO).
type GSOStats struct {
	// Active reports that WriteBatch sends trains: Config.GSO asked for
	// it, the kernel offers UDP_SEGMENT and no train has been refused.
	Active bool
	// Trains counts the trains the kernel accepted; Segments the
	// datagrams they carried.
	Trains, Segments uint64
	// Fallbacks is 1 when GSO was asked for but turned off: the kernel
	// does not know UDP_SEGMENT, or it refused a train. 0 otherwise.
	Fallbacks uint64
	// Reason is the error that turned GSO off (ENOPROTOOPT from the probe
	// at Open, or the send's EIO, EINVAL, EOPNOTSUPP or EMSGSIZE), nil
	// while GSO is active or was not asked for.
	Reason error
}
