package retransmit

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/mdbus/mdbus/subscriber"
)

// RewinderConfig configures a Rewinder. The zero value of each field is
// its default, except Feed and Server.Listen, which are required.
type RewinderConfig struct {
	// Feed is the multicast group:port of the feed to cache.
	Feed netip.AddrPort
	// Interface to join the feed on; default "lo".
	Interface string
	// Source makes the join source-specific when valid.
	Source netip.Addr
	// Cache bounds the cached history.
	Cache CacheConfig
	// Server configures the re-request server; its Sources are set by
	// the rewinder (the cache first, then any given here, such as a
	// journal).
	Server ServerConfig
	Logger *slog.Logger
}

// Rewinder subscribes to a feed, caches every message it delivers and
// answers re-requests from that cache, so repairs outlive the publisher:
// when a publisher crashes, subscribers still recover every message that
// reached the wire before it died.
//
// The rewinder joins live: the first packet it hears starts each session's
// history. Start it before the publisher to hold a session from sequence 1.
// Messages reach the cache in order, once each (the subscriber's
// guarantee); a range the rewinder itself misses and never recovers
// restarts that session's cached range (see Cache).
type Rewinder struct {
	cache *Cache
	sub   *subscriber.Subscriber
	srv   *Server
}

// NewRewinder starts a rewinder.
func NewRewinder(cfg RewinderConfig) (*Rewinder, error) {
	if !cfg.Feed.IsValid() {
		return nil, fmt.Errorf("%w: rewinder: no feed group", ErrConfig)
	}
	r := &Rewinder{cache: NewCache(cfg.Cache)}
	srvCfg := cfg.Server
	srvCfg.Sources = append([]Source{r.cache}, cfg.Server.Sources...)
	if srvCfg.Logger == nil {
		srvCfg.Logger = cfg.Logger
	}
	srv, err := NewServer(srvCfg)
	if err != nil {
		return nil, fmt.Errorf("retransmit: rewinder: %w", err)
	}
	r.srv = srv
	sub, err := subscriber.New(subscriber.Config{
		Group: cfg.Feed, Interface: cfg.Interface, Source: cfg.Source, Logger: cfg.Logger,
		OnMessage: func(m subscriber.Message) { r.cache.Add(m.Stream.Session, m.Seq, m.Data) },
	})
	if err != nil {
		srv.Close()
		return nil, fmt.Errorf("retransmit: rewinder: %w", err)
	}
	r.sub = sub
	return r, nil
}

// Addr is where re-requests go.
func (r *Rewinder) Addr() netip.AddrPort { return r.srv.Addr() }

// Cache is the rewinder's cache.
func (r *Rewinder) Cache() *Cache { return r.cache }

// ServerStats are the server's counters.
func (r *Rewinder) ServerStats() ServerStats { return r.srv.Stats() }

// FeedStats are the feed subscriber's counters.
func (r *Rewinder) FeedStats() subscriber.Stats { return r.sub.Stats() }

// Close stops the feed subscriber and the server and waits for both.
func (r *Rewinder) Close() error {
	return errors.Join(r.sub.Close(), r.srv.Close())
}
