package publisher

// GoTimers returns c with the sending goroutine on Go timers alone, as
// tests in a testing/synctest bubble need (Config.goTimers).
func GoTimers(c Config) Config {
	c.goTimers = true
	return c
}
