package fanout

import (
	"errors"
	"fmt"
	"strings"

	"github.com/mdbus/mdbus/internal/cfgcheck"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
)

// WriterConfig configures a Writer, by ReaderConfig's rule for zero and
// negative values.
type WriterConfig struct {
	// Feed is the subscription the writer makes: group, interface,
	// retransmitters, buffers. Its callbacks, when set, are called after
	// the writer has published each event to the ring.
	Feed subscriber.Config
	// Path is the ring file; default Path("", Name(Feed.Group)).
	Path string
	// Capacity is the data area in bytes, a power of two; default
	// DefaultCapacity (64 MiB: 0.55 s of 64-byte messages, 120-byte
	// records, at a million a second). NewWriter refuses one that is
	// not, wrapping ErrConfig.
	Capacity int
}

// Name is the default ring name of a feed group: "239.1.1.1-30001".
func Name(group fmt.Stringer) string {
	s := strings.NewReplacer("[", "", "]", "", ":", "-", "%", "-").Replace(group.String())
	return s
}

// Writer is the host's one subscriber to a feed: it joins the feed,
// recovers it (NAKs, repairs, once for the host) and publishes the
// in-order stream, with loss notices, to a ring file that any number of
// local Readers read.
type Writer struct {
	ring *Ring
	sub  *subscriber.Subscriber
}

// NewWriter creates (or continues) the ring file and starts the
// subscription.
func NewWriter(cfg WriterConfig) (*Writer, error) {
	if cfg.Path == "" {
		if !cfg.Feed.Group.IsValid() {
			return nil, fmt.Errorf("%w: WriterConfig.Feed.Group is required", ErrConfig)
		}
		cfg.Path = Path("", Name(cfg.Feed.Group))
	}
	if err := cfgcheck.Negative(ErrConfig, cfgcheck.F("Capacity", cfg.Capacity)); err != nil {
		return nil, err
	}
	ring, err := Create(cfg.Path, cfg.Capacity)
	if err != nil {
		return nil, err
	}
	feed := cfg.Feed
	onMsg, onLoss, onResync, onEnd := feed.OnMessage, feed.OnLoss, feed.OnResync, feed.OnEnd
	feed.OnMessage = func(m subscriber.Message) {
		ring.Message(m, ring.Now())
		if onMsg != nil {
			onMsg(m)
		}
	}
	feed.OnLoss = func(l subscriber.Loss) {
		ring.Loss(l)
		if onLoss != nil {
			onLoss(l)
		}
	}
	feed.OnResync = func(rs subscriber.Resync) {
		ring.Resync(rs)
		if onResync != nil {
			onResync(rs)
		}
	}
	feed.OnEnd = func(id subscriber.StreamID, next wire.Seq) {
		ring.End(id, next)
		if onEnd != nil {
			onEnd(id, next)
		}
	}
	sub, err := subscriber.New(feed)
	if err != nil {
		ring.Close()
		return nil, err
	}
	return &Writer{ring: ring, sub: sub}, nil
}

// Path returns the ring file's path.
func (w *Writer) Path() string { return w.ring.Path() }

// Subscriber returns the writer's subscription (for its Stats).
func (w *Writer) Subscriber() *subscriber.Subscriber { return w.sub }

// Stats returns the ring's counts.
func (w *Writer) Stats() RingStats { return w.ring.Stats() }

// Close stops the subscription, then marks the ring closed. The file
// stays for a restarted writer to continue. A second Close returns the
// subscriber's ErrClosed.
func (w *Writer) Close() error {
	err := w.sub.Close()
	return errors.Join(err, w.ring.Close())
}
