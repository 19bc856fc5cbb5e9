// zmqbench: ZeroMQ PUB/SUB over PGM (epgm://) or NORM (norm://) with the
// message format of mdbus bench, so that its figures compare with mdbus and
// raw UDP measured in the same lab (bench/peers/run.sh runs it).
//
// Every message starts with the mdbus bench stamp: the scheduled send time
// (CLOCK_MONOTONIC ns, big endian, 8 bytes) and a sequence number from 1
// (big endian, 8 bytes). Latency is delivery time minus the scheduled time,
// so a stalled sender shows in the latency of every message it delayed
// (coordinated omission corrected as mdbus bench does). The end of a run is
// a stamp with sequence 2^64-1, sent ten times.
//
// Modes (one process each; run.sh starts them):
//
//   zmqbench pub  --endpoint E [--size N] [--rate R] [--duration S]
//   zmqbench sub  --endpoint E [--duration S] [--latency] [--warmup S] [--hgrm FILE]
//   zmqbench ping --endpoint A --reply B [--size N] --rate R [--duration S] [--warmup S] [--hgrm FILE]
//   zmqbench pong --endpoint A --reply B [--duration S]
//
// --rate 0 publishes as fast as ZeroMQ takes messages. Common options:
// --zmq-rate KBITS (ZMQ_RATE; the default of 100 kbit/s is far too low),
// --recovery-ms MS (ZMQ_RECOVERY_IVL), --hwm N (send and receive high-water
// marks). Results are printed as one line of key=value pairs.
//
// Build: cc -O2 -o zmqbench zmqbench.c $(pkg-config --cflags --libs libzmq) -lpthread -lm
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#define STAMP_LEN 16
#define END_SEQ UINT64_MAX

static const char *endpoint, *reply, *hgrm_path;
static int size = 64, latency, zmq_rate = 300000, recovery_ms = 1000, hwm = 100000;
static double rate, duration = 10, warmup = 0.5;

static int64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void put64(unsigned char *b, uint64_t v) {
	for (int i = 7; i >= 0; i--, v >>= 8) b[i] = (unsigned char)v;
}

static uint64_t get64(const unsigned char *b) {
	uint64_t v = 0;
	for (int i = 0; i < 8; i++) v = v << 8 | b[i];
	return v;
}

static void die(const char *what) {
	fprintf(stderr, "zmqbench: %s: %s\n", what, zmq_strerror(zmq_errno()));
	exit(1);
}

static void *open_socket(void *ctx, int type, const char *ep) {
	void *s = zmq_socket(ctx, type);
	if (!s) die("zmq_socket");
	int h = hwm, buf = 4 << 20, linger = 2000;
	// ZMQ_RATE (kbit/s) and ZMQ_RECOVERY_IVL (ms) are int options.
	if (zmq_setsockopt(s, ZMQ_RATE, &zmq_rate, sizeof zmq_rate) != 0) die("ZMQ_RATE");
	if (zmq_setsockopt(s, ZMQ_RECOVERY_IVL, &recovery_ms, sizeof recovery_ms) != 0) die("ZMQ_RECOVERY_IVL");
	zmq_setsockopt(s, ZMQ_SNDHWM, &h, sizeof h);
	zmq_setsockopt(s, ZMQ_RCVHWM, &h, sizeof h);
	zmq_setsockopt(s, ZMQ_SNDBUF, &buf, sizeof buf);
	zmq_setsockopt(s, ZMQ_RCVBUF, &buf, sizeof buf);
	zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
	if (type == ZMQ_SUB) {
		if (zmq_setsockopt(s, ZMQ_SUBSCRIBE, "", 0) != 0) die("ZMQ_SUBSCRIBE");
		int to = 200;
		zmq_setsockopt(s, ZMQ_RCVTIMEO, &to, sizeof to);
	}
	if (zmq_connect(s, ep) != 0) {
		fprintf(stderr, "zmqbench: connect %s: %s\n", ep, zmq_strerror(zmq_errno()));
		exit(1);
	}
	return s;
}

// ---- latency samples ----

static int64_t *samples;
static size_t nsamples, capsamples;

static void sample(int64_t v) {
	if (nsamples < capsamples) samples[nsamples++] = v;
}

static int cmp64(const void *a, const void *b) {
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static int64_t at(double q) { // q in [0,1]
	if (!nsamples) return 0;
	size_t i = (size_t)(q * (double)nsamples);
	if (i >= nsamples) i = nsamples - 1;
	return samples[i];
}

// report prints percentiles in microseconds and writes an .hgrm-style
// percentile table (microseconds) that mdbus bench chart reads.
static void report_latency(void) {
	qsort(samples, nsamples, sizeof *samples, cmp64);
	printf(" samples=%zu p50_us=%.2f p90_us=%.2f p99_us=%.2f p99_9_us=%.2f p99_99_us=%.2f max_us=%.2f",
	       nsamples, at(.5) / 1e3, at(.9) / 1e3, at(.99) / 1e3, at(.999) / 1e3, at(.9999) / 1e3,
	       nsamples ? samples[nsamples - 1] / 1e3 : 0.0);
	if (!hgrm_path || !nsamples) return;
	FILE *f = fopen(hgrm_path, "w");
	if (!f) {
		perror(hgrm_path);
		return;
	}
	fprintf(f, " Value\tPercentile\tTotalCount\t1/(1-Percentile)\n\n");
	// Five rows per halving of 1-q, as HdrHistogram's PercentilesPrint.
	for (int k = 0;; k++) {
		double q = 1 - pow(2, -k / 5.0);
		if (1 / (1 - q) > (double)nsamples) break;
		size_t n = (size_t)(q * nsamples);
		fprintf(f, "%12.3f %12f %12zu %12.2f\n", at(q) / 1e3, q, n, 1 / (1 - q));
	}
	fprintf(f, "%12.3f %12f %12zu %12s\n", samples[nsamples - 1] / 1e3, 1.0, nsamples, "inf");
	fclose(f);
}

// ---- publishing ----

static void wait_until(int64_t t) {
	int64_t d;
	while ((d = t - now_ns()) > 0) {
		if (d > 2000000) {
			struct timespec ts = {0, d - 1000000};
			nanosleep(&ts, NULL);
		} else {
			sched_yield();
		}
	}
}

// publish sends stamped messages on s at rate for duration, then the end
// marker, and prints what it sent.
static void publish(void *s, const char *label) {
	unsigned char *msg = calloc(1, size < STAMP_LEN ? STAMP_LEN : size);
	size_t len = size < STAMP_LEN ? STAMP_LEN : size;
	for (size_t i = STAMP_LEN; i < len; i++) msg[i] = (unsigned char)(i * 131);
	usleep(1000 * 1000); // joins, PGM/NORM session start
	int64_t start = now_ns(), end = start + (int64_t)(duration * 1e9);
	double period = rate > 0 ? 1e9 / rate : 0;
	uint64_t k = 0, dropped = 0;
	for (;;) {
		int64_t now = now_ns();
		if (now >= end) break;
		int64_t sched = now;
		if (rate > 0) {
			sched = start + (int64_t)((double)k * period);
			if (sched > now) {
				wait_until(sched);
				continue;
			}
		}
		put64(msg, (uint64_t)sched);
		put64(msg + 8, k + 1);
		if (zmq_send(s, msg, len, rate > 0 ? 0 : ZMQ_DONTWAIT) < 0) {
			if (zmq_errno() == EAGAIN) {
				dropped++;
				continue;
			}
			die("zmq_send");
		}
		k++;
	}
	double secs = (now_ns() - start) / 1e9;
	put64(msg, (uint64_t)now_ns());
	put64(msg + 8, END_SEQ);
	for (int i = 0; i < 10; i++) {
		zmq_send(s, msg, len, 0);
		usleep(10000);
	}
	printf("%s sent=%" PRIu64 " seconds=%.3f rate=%.0f eagain=%" PRIu64 "\n", label, k, secs, k / secs, dropped);
	fflush(stdout);
	free(msg);
}

// ---- receiving ----

struct rx {
	uint64_t received, next, missing, disorder;
	int64_t first, last;
	int ended;
};

// receive reads from s until the end marker or the deadline. With fwd set
// it forwards each message verbatim (pong), and goes on for 300 ms after
// the end marker so that its repeats pass too. With latency it samples
// now - scheduled for messages scheduled after the warm-up (counted from
// the first message's schedule).
static void receive(void *s, void *fwd, struct rx *r, int64_t deadline) {
	unsigned char buf[65536];
	int64_t warm_end = 0, stop = deadline;
	r->next = 1;
	while (now_ns() < stop) {
		int n = zmq_recv(s, buf, sizeof buf, 0);
		if (n < 0) {
			if (zmq_errno() == EAGAIN || zmq_errno() == EINTR) continue;
			die("zmq_recv");
		}
		int64_t now = now_ns();
		if (fwd) zmq_send(fwd, buf, n, 0);
		if (n < STAMP_LEN) continue;
		int64_t sched = (int64_t)get64(buf);
		uint64_t seq = get64(buf + 8);
		if (seq == END_SEQ) {
			if (!fwd) {
				r->ended = 1;
				break;
			}
			if (!r->ended) stop = now + 300000000;
			r->ended = 1;
			continue;
		}
		if (!r->received) {
			r->first = now;
			warm_end = sched + (int64_t)(warmup * 1e9);
		}
		r->last = now;
		r->received++;
		if (seq == r->next) r->next++;
		else if (seq > r->next) { r->missing += seq - r->next; r->next = seq + 1; }
		else r->disorder++;
		if (latency && sched >= warm_end) sample(now - sched);
	}
}

// ---- ping: a sender thread publishes on A, this thread receives B ----

static void *ping_sender(void *arg) {
	publish(arg, "ping");
	return NULL;
}

int main(int argc, char **argv) {
	if (argc < 2) {
		fprintf(stderr, "usage: zmqbench pub|sub|ping|pong --endpoint E [--reply E2] [--size N] [--rate R] [--duration S]\n"
		                "       [--latency] [--warmup S] [--hgrm FILE] [--zmq-rate KBITS] [--recovery-ms MS] [--hwm N]\n");
		return 2;
	}
	const char *mode = argv[1];
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(name) (strcmp(a, name) == 0 && v && ++i)
		if (ARG("--endpoint")) endpoint = v;
		else if (ARG("--reply")) reply = v;
		else if (ARG("--size")) size = atoi(v);
		else if (ARG("--rate")) rate = atof(v);
		else if (ARG("--duration")) duration = atof(v);
		else if (ARG("--warmup")) warmup = atof(v);
		else if (ARG("--hgrm")) hgrm_path = v;
		else if (ARG("--zmq-rate")) zmq_rate = atoi(v);
		else if (ARG("--recovery-ms")) recovery_ms = atoi(v);
		else if (ARG("--hwm")) hwm = atoi(v);
		else if (strcmp(a, "--latency") == 0) latency = 1;
		else {
			fprintf(stderr, "zmqbench: unknown or incomplete option %s\n", a);
			return 2;
		}
	}
	if (!endpoint || size < STAMP_LEN || size > 65000 || rate < 0 || duration <= 0 || duration > 3600 || warmup < 0) {
		fprintf(stderr, "zmqbench: need --endpoint, --size %d..65000, --rate >= 0, --duration in (0, 3600]\n", STAMP_LEN);
		return 2;
	}
	int major, minor, patch;
	zmq_version(&major, &minor, &patch);
	void *ctx = zmq_ctx_new();
	struct rx r = {0};
	int64_t grace = 5000000000LL; // wait this long past the expected end
	if (strcmp(mode, "pub") == 0) {
		void *s = open_socket(ctx, ZMQ_PUB, endpoint);
		publish(s, "pub");
		zmq_close(s);
	} else if (strcmp(mode, "sub") == 0 || strcmp(mode, "pong") == 0) {
		int pong = mode[1] == 'o';
		void *s = open_socket(ctx, ZMQ_SUB, endpoint);
		void *out = NULL;
		if (pong) {
			if (!reply) { fprintf(stderr, "zmqbench: pong needs --reply\n"); return 2; }
			out = open_socket(ctx, ZMQ_PUB, reply);
		}
		if (latency) {
			capsamples = (size_t)((rate > 0 ? rate : 2e6) * (duration + 2)) + 1024;
			samples = malloc(capsamples * sizeof *samples);
		}
		int64_t start = now_ns();
		// The publisher waits 1 s before it starts.
		receive(s, out, &r, start + (int64_t)((duration + 1) * 1e9) + grace);
		double secs = r.last > r.first ? (r.last - r.first) / 1e9 : 0;
		printf("%s zmq=%d.%d.%d received=%" PRIu64 " missing=%" PRIu64 " disorder=%" PRIu64 " ended=%d seconds=%.3f rate=%.0f",
		       mode, major, minor, patch, r.received, r.missing, r.disorder, r.ended, secs, secs > 0 ? r.received / secs : 0.0);
		if (latency) report_latency();
		printf("\n");
		if (out) zmq_close(out);
		zmq_close(s);
	} else if (strcmp(mode, "ping") == 0) {
		if (!reply || rate <= 0) { fprintf(stderr, "zmqbench: ping needs --reply and --rate > 0\n"); return 2; }
		void *in = open_socket(ctx, ZMQ_SUB, reply);
		void *s = open_socket(ctx, ZMQ_PUB, endpoint);
		latency = 1;
		capsamples = (size_t)(rate * (duration + 2)) + 1024;
		samples = malloc(capsamples * sizeof *samples);
		pthread_t t;
		int64_t start = now_ns();
		pthread_create(&t, NULL, ping_sender, s);
		receive(in, NULL, &r, start + (int64_t)((duration + 1) * 1e9) + grace);
		pthread_join(t, NULL);
		printf("ping zmq=%d.%d.%d received=%" PRIu64 " missing=%" PRIu64 " ended=%d", major, minor, patch, r.received, r.missing, r.ended);
		report_latency();
		printf("\n");
		zmq_close(s);
		zmq_close(in);
	} else {
		fprintf(stderr, "zmqbench: unknown mode %s\n", mode);
		return 2;
	}
	zmq_ctx_term(ctx);
	return 0;
}
