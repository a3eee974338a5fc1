/*
 * wearlab's device CPU mechanism: an LD_PRELOAD library that makes a process's cryptography take
 * a device's time (wearlab.model.devices; README "Devices").
 *
 * It interposes the libcrypto calls a TLS stack makes (EVP_PKEY_sign/verify/derive/keygen,
 * EVP_DigestSign/Verify*, EVP_Digest*, EVP_Cipher*, X509_verify_cert) and, around the TLS
 * handshake, SSL_connect/SSL_do_handshake/SSL_read/SSL_write with BIO_read/BIO_write. Each call is
 * timed on the wall clock (the TSC, at the rate wearlab measured once against CLOCK_MONOTONIC: a
 * clock_gettime costs ~20 us in the UML guest, rdtsc 40 ns; CPU time is useless there, it
 * advances in 10 ms ticks) and the
 * difference between the device's time for that operation and size (the profile's table) and
 * the time it took here becomes a debt, paid by sleeping (default: other processes of the one
 * guest CPU - a server - keep running, as on separate devices) or spinning
 * (WEARLAB_DEVICE_PAD=spin). A sleep's overshoot is credited to the next operation, so the
 * timer's wake-up latency does not accumulate. Debt is always paid before the process sends or
 * reads anything through a BIO, so nothing leaves earlier than it would from the device.
 *
 * The device's cores: every process of a node (and its tcpcryptd) maps the node's cores file
 * (WEARLAB_DEVICE_CORES) - per core, until when it is busy - and claims each operation's device
 * time on a core with a compare-and-swap, from when its thread was ready: the work of concurrent
 * threads and processes queues onto the device's cores instead of each thread getting its own.
 *
 * The per-handshake platform cost (a Java TLS stack, a browser, DVFS: what the primitives alone do
 * not explain) is charged to the client of a handshake only, once: the full handshake's or, for a
 * resumed one (SSL_session_reused), the resumed one's. It is owed just before the client's second
 * flight leaves - the first BIO write of its key exchange, certificate, certificate verify or
 * Finished (or TLS 1.2's ChangeCipherSpec) after the server's flight was read, where seed 000 puts
 * ~87 % of the watch's handshake - or, for a handshake that writes no such flight through a BIO (a
 * QUIC stack's), when it completes. One table per process tracks every client handshake in
 * progress (1024; one it has no room for is counted and charged at completion).
 *
 * Which libcrypto: a process may hold two (pycurl's wheel bundles its own libssl/libcrypto,
 * loaded RTLD_LOCAL beside the system's). Every call resolves the real function, and the helpers
 * that read its objects, from the library that called it (dladdr of the return address, then
 * dlsym on that library's own dependency tree), never from whatever comes next in the global
 * scope. Nested calls (libcrypto calling its own interposed functions) are not charged twice.
 *
 * The platform's cost per byte of data (the profile's `data:plain` and `data:encrypted`, e.g. seed
 * 000's watch moving HTTP at 2.6 and HTTPS at 2.1 Mbit/s through its own stack) is charged where
 * the application receives data (WEARLAB_DEVICE_PER_BYTE=1: the fetch agent): `data:encrypted` on
 * the plaintext SSL_read/SSL_read_ex return, `data:plain` on what recv/recvfrom/recvmsg return
 * outside any TLS call (not MSG_PEEK). Paid by sleeping like any debt, so the application reads
 * at the device's rate and TCP's receive window carries that rate back to the sender.
 *
 * A program that does other work than cryptography on the device - a phone's proxy - can also
 * have its own computation slowed by the device's general CPU factor (WEARLAB_DEVICE_CPU_FACTOR=1):
 * the wall time between two of its system calls (read, write, send, recv, splice, poll, epoll,
 * select, accept, connect: what a proxy's loop is made of) is its computation there, and
 * (factor - 1) times it is owed before the next call. Time inside system calls (the kernel's
 * copying) is not scaled, and neither is a preemption told from computation.
 *
 * Environment:
 *   WEARLAB_DEVICE_PROFILE  the profile (wearlab.model.devices.profile_text); unset: no effect
 *   WEARLAB_DEVICE_CPU_FACTOR  1: also the general CPU factor on the computation between calls
 *   WEARLAB_DEVICE_PER_BYTE    1: also the platform's cost per byte received (data:plain, data:encrypted)
 *   WEARLAB_DEVICE_PAD      sleep (default) | spin
 *   WEARLAB_DEVICE_STATS    a file the library keeps its counters in (mmap, read by wearlab; opened as it
 *                           is, so an exec'd child adds to its parent's counters)
 *   WEARLAB_DEVICE_CORES    the node's cores file (mmap, made by wearlab; holds the node's TSC rate)
 *   WEARLAB_DEVICE_TSC_HZ   the TSC's rate, measured once by wearlab (without either: 10 ms here)
 *
 * No OpenSSL headers: objects are opaque pointers and the few key-type NIDs are OpenSSL's stable
 * ABI constants, so this builds with a bare gcc and serves any OpenSSL 3 it finds in a process.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define HAVE_TSC 1
#endif

/* ---------------------------------------------------------------------------------------------
 * Clock: nanoseconds from the TSC (calibrated once against CLOCK_MONOTONIC), else clock_gettime. */

static double tsc_ns_per_tick;   /* 0: use clock_gettime */
/* What one clock read costs: half of the first read of a call and half of its last fall outside
 * the interval they measure, so each call adds one read's cost to what it took here (40 ns a
 * read in the UML guest: with four calls per 16-byte AEAD block, 0.16 of its 1 us otherwise). */
static int64_t read_cost_ns;

static int64_t mono_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Nanoseconds on the node's time base: the TSC times 1e9 / the node's TSC rate. Every process of
 * the node (and tcpcryptd) computes it alike from the same rate, so their core slots compare. */
static int64_t now_ns(void) {
#ifdef HAVE_TSC
    if (tsc_ns_per_tick > 0)
        return (int64_t)((double)__rdtsc() * tsc_ns_per_tick);
#endif
    return mono_ns();
}

#ifdef HAVE_TSC
/* A (TSC, CLOCK_MONOTONIC) pair: the tightest of five brackets (a clock_gettime is a system call
 * of ~20 us in the UML guest, and an interrupt may fall inside any one of them). */
static void tsc_pair(uint64_t *tsc, int64_t *mono) {
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 5; i++) {
        uint64_t a = __rdtsc();
        int64_t m = mono_ns();
        uint64_t b = __rdtsc();
        if (b - a < best) {
            best = b - a;
            *tsc = a + (b - a) / 2;
            *mono = m;
        }
    }
}
#endif

/* The TSC's rate (ticks per second) against CLOCK_MONOTONIC over `window_ms`; 0 without a TSC.
 * wearlab measures it once (wearlab.nodes.devicecpu, through ctypes) and hands it to every process
 * of a node, in the node's cores file and in WEARLAB_DEVICE_TSC_HZ. */
double wearlab_devicecpu_measure_tsc_hz(int window_ms) {
#ifdef HAVE_TSC
    uint64_t c0 = 0, c1 = 0;
    int64_t m0 = 0, m1 = 0;
    tsc_pair(&c0, &m0);
    struct timespec d = {window_ms / 1000, (long)(window_ms % 1000) * 1000000L};
    while (nanosleep(&d, &d) != 0 && errno == EINTR) {}
    tsc_pair(&c1, &m1);
    if (c1 > c0 && m1 > m0)
        return (double)(c1 - c0) * 1e9 / (double)(m1 - m0);
#else
    (void)window_ms;
#endif
    return 0;
}

/* The clock's rate: the node's, measured once by wearlab (its cores file; WEARLAB_DEVICE_TSC_HZ
 * without one); a process started with neither measures it itself for 10 ms. On a node every
 * process must use the very same rate - their core slots are compared in its nanoseconds -, so
 * a cores file without one (no TSC) makes CLOCK_MONOTONIC the clock. */
static void calibrate_clock(int node, double node_hz) {
#ifdef HAVE_TSC
    const char *env = getenv("WEARLAB_DEVICE_TSC_HZ");
    double hz = node ? node_hz : env && atof(env) > 1e8 ? atof(env) : wearlab_devicecpu_measure_tsc_hz(10);
    if (hz > 1e8)
        tsc_ns_per_tick = 1e9 / hz;
#else
    (void)node;
    (void)node_hz;
#endif
    /* The cheapest of 20 batches: a batch that an interrupt or a preemption hit says nothing. */
    read_cost_ns = INT64_MAX;
    for (int b = 0; b < 20; b++) {
        int64_t r0 = now_ns(), r = r0;
        for (int i = 0; i < 50; i++)
            r = now_ns();
        if ((r - r0) / 50 < read_cost_ns)
            read_cost_ns = (r - r0) / 50;
    }
}

/* ---------------------------------------------------------------------------------------------
 * The profile: per-operation times, per-byte tables, the handshake's platform cost. */

#define MAX_OPS 128
#define MAX_POINTS 12

struct op {
    char key[48];                 /* "verify:rsa2048", "cipher:aes-128-gcm", "digest:sha256" */
    int n;                        /* points; 1 with size 0 = a fixed time per call */
    double size[MAX_POINTS];
    double ns[MAX_POINTS];
    int slot;                     /* its counters (stats), found once */
};

static struct {
    int loaded;
    char name[64];
    struct op ops[MAX_OPS];
    int n_ops;
    double handshake_ns;          /* the platform's cost of a client's full TLS handshake */
    double resumed_ns;            /* ... of a resumed one (-1 until read: then the full one's) */
    double abbreviated_ns;        /* ... of TLS 1.2's abbreviated one (-1 until read: the resumed one's) */
    double cpu_factor;            /* what an operation missing from the table costs: host time x this */
    int spin;
} prof;

static void load_profile(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "wearlab-devicecpu: cannot read %s: %s\n", path, strerror(errno));
        return;
    }
    char line[1024];
    prof.cpu_factor = 1.0;
    prof.resumed_ns = -1;
    prof.abbreviated_ns = -1;
    while (fgets(line, sizeof line, f)) {
        char word[32], key[48];
        if (line[0] == '#' || sscanf(line, "%31s", word) != 1)
            continue;
        if (!strcmp(word, "device")) {
            sscanf(line, "%*s %63s", prof.name);
        } else if (!strcmp(word, "cpu_factor")) {
            sscanf(line, "%*s %lf", &prof.cpu_factor);
        } else if (!strcmp(word, "handshake_ns")) {
            sscanf(line, "%*s %lf", &prof.handshake_ns);
        } else if (!strcmp(word, "resumed_handshake_ns")) {
            sscanf(line, "%*s %lf", &prof.resumed_ns);
        } else if (!strcmp(word, "abbreviated_handshake_ns")) {
            sscanf(line, "%*s %lf", &prof.abbreviated_ns);
        } else if ((!strcmp(word, "op") || !strcmp(word, "bytes")) && prof.n_ops < MAX_OPS) {
            struct op *o = &prof.ops[prof.n_ops];
            int at = 0, used = 0;
            if (sscanf(line, "%*s %47s %n", key, &at) != 1)
                continue;
            snprintf(o->key, sizeof o->key, "%s", key);
            o->slot = -1;
            if (!strcmp(word, "op")) {
                o->n = 1;
                o->size[0] = 0;
                if (sscanf(line + at, "%lf", &o->ns[0]) != 1)
                    continue;
            } else {
                const char *p = line + at;
                o->n = 0;
                while (o->n < MAX_POINTS && sscanf(p, "%lf:%lf%n", &o->size[o->n], &o->ns[o->n], &used) == 2) {
                    o->n++;
                    p += used;
                }
                if (o->n == 0)
                    continue;
            }
            prof.n_ops++;
        }
    }
    fclose(f);
    if (prof.resumed_ns < 0)  /* a profile from before the field: a resumption costs a full handshake */
        prof.resumed_ns = prof.handshake_ns;
    if (prof.abbreviated_ns < 0)
        prof.abbreviated_ns = prof.resumed_ns;
    prof.loaded = 1;
}

static struct op *find_op(const char *key) {
    for (int i = 0; i < prof.n_ops; i++)
        if (!strcmp(prof.ops[i].key, key))
            return &prof.ops[i];
    return NULL;
}

/* The device's time for `bytes` through a per-byte table: piecewise linear between the measured
 * block sizes, proportional below the first, the last segment's slope beyond the last. */
static double table_ns(const struct op *o, double bytes) {
    if (o->n == 1 && o->size[0] == 0)
        return o->ns[0];
    if (o->n == 1)
        return o->ns[0] * bytes / o->size[0];
    if (bytes <= o->size[0])
        return o->ns[0] * bytes / o->size[0];
    for (int i = 1; i < o->n; i++)
        if (bytes <= o->size[i])
            return o->ns[i - 1] + (o->ns[i] - o->ns[i - 1]) * (bytes - o->size[i - 1]) / (o->size[i] - o->size[i - 1]);
    int k = o->n - 1;
    return o->ns[k] + (o->ns[k] - o->ns[k - 1]) * (bytes - o->size[k]) / (o->size[k] - o->size[k - 1]);
}

/* What marginal bytes cost (AEAD's additional data: no call of its own in the table's sense). */
static double marginal_ns(const struct op *o, double bytes) {
    if (o->n < 2)
        return o->size[0] > 0 ? o->ns[0] * bytes / o->size[0] : 0;
    int k = o->n - 1;
    return (o->ns[k] - o->ns[k - 1]) * bytes / (o->size[k] - o->size[k - 1]);
}

/* ---------------------------------------------------------------------------------------------
 * Counters, shared through an mmap'ed file (wearlab.nodes.devicecpu reads it): per key, the
 * calls, bytes, time here and time on the device. wearlab creates the file (zeroed, with this
 * layout) before it starts the process; the library opens it as it is, so a child that inherits
 * WEARLAB_DEVICE_STATS - an exec'd program, a forked worker - adds to its parent's counters. */

#define STATS_MAGIC "WLDCPU2"
#define STATS_SLOTS 128

struct stat_slot {
    char key[48];                 /* key[0] is written last: a slot is in use once it is non-zero */
    uint64_t calls, bytes, host_ns, device_ns;
};
struct stats_file {
    char magic[8];
    uint32_t slots_used, pid;     /* pid: the last process that opened it */
    char device[64];
    struct stat_slot slot[STATS_SLOTS];
};

static struct stats_file *stats;
static struct stats_file stats_private;  /* when no file was asked for */
static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;

static void open_stats(const char *path) {
    stats = &stats_private;
    if (path && *path) {
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0) {
            fprintf(stderr, "wearlab-devicecpu: cannot use %s for counters: %s\n", path, strerror(errno));
            if (fd >= 0)
                close(fd);
        } else {
            /* Another size is not this layout (an empty file, an older library's): start it afresh. */
            int fresh = st.st_size != (off_t)sizeof(struct stats_file);
            if (fresh && (ftruncate(fd, 0) != 0 || ftruncate(fd, sizeof(struct stats_file)) != 0)) {
                fprintf(stderr, "wearlab-devicecpu: cannot size %s: %s\n", path, strerror(errno));
            } else {
                void *m = mmap(NULL, sizeof(struct stats_file), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
                if (m != MAP_FAILED) {
                    stats = m;
                    if (memcmp(stats->magic, STATS_MAGIC, sizeof STATS_MAGIC) != 0)
                        memset(stats, 0, sizeof *stats);
                }
            }
            close(fd);
        }
    }
    memcpy(stats->magic, STATS_MAGIC, sizeof STATS_MAGIC);
    stats->pid = (uint32_t)getpid();
}

static struct stat_slot *find_slot(const char *key, uint32_t n) {
    for (uint32_t i = 0; i < n && i < STATS_SLOTS; i++) {
        struct stat_slot *s = &stats->slot[i];
        if (__atomic_load_n(&s->key[0], __ATOMIC_ACQUIRE) && !strncmp(s->key, key, sizeof s->key))
            return s;
    }
    return NULL;
}

/* A key's slot, made on first use. Processes sharing the file claim slots with a compare-and-swap
 * on slots_used; two that add the same key at the same instant may each get a slot for it, which
 * the reader sums. */
static struct stat_slot *slot_for(const char *key) {
    struct stat_slot *s = find_slot(key, __atomic_load_n(&stats->slots_used, __ATOMIC_ACQUIRE));
    if (s)
        return s;
    pthread_mutex_lock(&stats_lock);
    for (;;) {
        uint32_t n = __atomic_load_n(&stats->slots_used, __ATOMIC_ACQUIRE);
        if ((s = find_slot(key, n)) != NULL || n >= STATS_SLOTS)
            break;
        if (__atomic_compare_exchange_n(&stats->slots_used, &n, n + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            s = &stats->slot[n];
            snprintf(s->key + 1, sizeof s->key - 1, "%s", key[0] ? key + 1 : "");
            __atomic_store_n(&s->key[0], key[0], __ATOMIC_RELEASE);
            break;
        }
    }
    pthread_mutex_unlock(&stats_lock);
    return s;
}

static void count_in(struct stat_slot *s, uint64_t bytes, int64_t host_ns, int64_t device_ns);

static void count(const char *key, uint64_t bytes, int64_t host_ns, int64_t device_ns) {
    count_in(slot_for(key), bytes, host_ns, device_ns);
}

/* The counters of a profile operation: its slot is looked up once (a search per call would cost
 * more than a 16-byte digest). */
static void count_op(struct op *o, uint64_t bytes, int64_t host_ns, int64_t device_ns) {
    if (o->slot < 0) {
        struct stat_slot *s = slot_for(o->key);
        if (!s)
            return;
        o->slot = (int)(s - stats->slot);
    }
    count_in(&stats->slot[o->slot], bytes, host_ns, device_ns);
}

/* Atomic additions: the file is shared by the threads of a process and by its children. */
static void count_in(struct stat_slot *s, uint64_t bytes, int64_t host_ns, int64_t device_ns) {
    if (!s)
        return;
    __atomic_fetch_add(&s->calls, 1, __ATOMIC_RELAXED);
    if (bytes)
        __atomic_fetch_add(&s->bytes, bytes, __ATOMIC_RELAXED);
    if (host_ns > 0)
        __atomic_fetch_add(&s->host_ns, (uint64_t)host_ns, __ATOMIC_RELAXED);
    if (device_ns > 0)
        __atomic_fetch_add(&s->device_ns, (uint64_t)device_ns, __ATOMIC_RELAXED);
}

/* ---------------------------------------------------------------------------------------------
 * The device's cores, shared by every process of a node (WEARLAB_DEVICE_CORES, made by wearlab:
 * wearlab.nodes.devicecpu.NodeCpu) and by its tcpcryptd (--device-cores): per core, until when it
 * is busy, in nanoseconds on the node's time base (the TSC at the node's rate, which the file
 * holds too). Work the device does is claimed on a core with a compare-and-swap: it starts when
 * its thread is ready and a core is free, so concurrent threads and processes queue onto the
 * device's cores instead of each computing on a core of its own. */

#define CORES_MAGIC "WLCORE1"
#define MAX_CORES 64

struct cores_file {
    char magic[8];
    uint32_t cores, reserved;
    double tsc_hz;                /* the node's TSC rate (0: CLOCK_MONOTONIC is the time base) */
    int64_t busy_until[MAX_CORES];
};

static struct cores_file *cores;  /* NULL: no node file, each thread computes on a core of its own */

static void open_cores(const char *path) {
    if (!path || !*path)
        return;
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "wearlab-devicecpu: cannot open the node's cores %s: %s\n", path, strerror(errno));
        return;
    }
    void *m = mmap(NULL, sizeof(struct cores_file), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return;
    struct cores_file *c = m;
    if (memcmp(c->magic, CORES_MAGIC, sizeof CORES_MAGIC) != 0 || c->cores < 1 || c->cores > MAX_CORES) {
        fprintf(stderr, "wearlab-devicecpu: %s is not a node's cores file\n", path);
        munmap(m, sizeof(struct cores_file));
        return;
    }
    cores = c;
}

/* Work of `device` ns that its thread is ready to start at `ready`: on the core that frees up
 * best for it - the one that became free last before `ready`, else the one that frees up first.
 * When it ends (node time). Work is queued in the order it is charged (no backfilling of a core's
 * idle time before work already queued on it). */
static int64_t claim_core(int64_t ready, int64_t device, int64_t *queued) {
    uint32_t n = cores->cores;
    for (;;) {
        int fit = -1, first = -1;
        int64_t fit_b = 0, first_b = INT64_MAX;
        for (uint32_t i = 0; i < n; i++) {
            int64_t b = __atomic_load_n(&cores->busy_until[i], __ATOMIC_ACQUIRE);
            if (b <= ready) {
                if (fit < 0 || b > fit_b) {
                    fit = (int)i;
                    fit_b = b;
                }
            } else if (b < first_b) {
                first = (int)i;
                first_b = b;
            }
        }
        int i = fit >= 0 ? fit : first;
        int64_t b = fit >= 0 ? fit_b : first_b;
        int64_t start = b > ready ? b : ready;
        if (__atomic_compare_exchange_n(&cores->busy_until[i], &b, start + device, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            *queued = start - ready;
            return start + device;
        }
    }
}

/* ---------------------------------------------------------------------------------------------
 * The client TLS handshakes in progress in this process (SSL_connect / SSL_do_handshake / a
 * handshake inside SSL_read or SSL_write), per SSL object: whether the server's flight was read
 * and the platform's cost charged. One table for the process (a page opens dozens of connections
 * at once, from any thread); a handshake it has no room for is counted (hs:overflow) and still
 * charged, when it completes. */

struct hs { const void *ssl; int read, charged; };
#define HS_SLOTS 1024
static struct hs hs_table[HS_SLOTS];
static int hs_used;               /* the table's high-water mark */
static pthread_mutex_t hs_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread struct hs *hs_now;  /* the handshake this thread is inside, if the table holds it */
static __thread int in_hs;          /* > 0 inside a client handshake step */
static __thread int in_ssl;         /* > 0 inside any interposed SSL_* call (its socket reads are TLS's) */

static struct hs *hs_enter(const void *ssl, int fresh) {
    struct hs *h = NULL, *free_slot = NULL;
    pthread_mutex_lock(&hs_lock);
    for (int i = 0; i < hs_used && !h; i++) {
        if (hs_table[i].ssl == ssl)
            h = &hs_table[i];
        else if (!hs_table[i].ssl && !free_slot)
            free_slot = &hs_table[i];
    }
    if (h) {
        if (fresh)
            h->read = h->charged = 0;
    } else {
        if (!free_slot && hs_used < HS_SLOTS)
            free_slot = &hs_table[hs_used++];
        if ((h = free_slot) != NULL) {
            h->ssl = ssl;
            h->read = h->charged = 0;
        }
    }
    pthread_mutex_unlock(&hs_lock);
    if (!h)
        count("hs:overflow", 0, 0, 0);
    return h;
}

static void hs_forget(const void *ssl) {
    pthread_mutex_lock(&hs_lock);
    for (int i = 0; i < hs_used; i++)
        if (hs_table[i].ssl == ssl)
            hs_table[i].ssl = NULL;
    pthread_mutex_unlock(&hs_lock);
}

/* The device's time per phase - inside a TLS handshake or not - for the energy model. */
static struct stat_slot *phase_slot[2];

static void count_phase(int64_t device_ns) {
    int i = in_hs ? 0 : 1;
    if (!phase_slot[i])
        phase_slot[i] = slot_for(i == 0 ? "phase:handshake" : "phase:other");
    if (phase_slot[i])
        count_in(phase_slot[i], 0, 0, device_ns);
}

/* ---------------------------------------------------------------------------------------------
 * Debt: device time owed by this thread, paid by sleeping (or spinning). */

#define PAY_MIN_NS 100000LL      /* sleep mode: smaller debts wait (a wake-up costs ~60-90 us) */
#define CREDIT_MAX_NS 50000000LL /* time lost here (a preemption, a late wake-up) given back at most */
#define IDLE_MIN_NS 1000000LL    /* a pause this long since the last charge is waiting, not computing */

static __thread int64_t debt_ns;
static __thread int64_t idle_from_ns;  /* when the last charge or payment ended */
static __thread int64_t padded_ns;     /* slept, spun or charged since the last system call */
static __thread int depth;        /* > 0 inside an interposed crypto call */
/* When the outermost interposed call was entered: the device's time replaces everything from
 * there to the charge (the real call, finding the library, naming the key), so the mechanism's
 * own bookkeeping is not added to the device's time. */
static __thread int64_t entered_ns, wrap_t0;
static __thread int wrap_charged;
#define ENTER entered_ns = now_ns()
#define BEGIN do { depth++; wrap_t0 = entered_ns; wrap_charged = 0; } while (0)

static void pay(int force) {
    if (debt_ns <= 0 || (!force && !prof.spin && debt_ns < PAY_MIN_NS))
        return;
    int64_t t0 = now_ns(), want = debt_ns, t1;
    if (prof.spin) {
        do t1 = now_ns(); while (t1 - t0 < want);
    } else {
        struct timespec d = {want / 1000000000LL, want % 1000000000LL};
        while (clock_nanosleep(CLOCK_MONOTONIC, 0, &d, &d) == EINTR) {}
        t1 = now_ns();
    }
    debt_ns -= t1 - t0;  /* an overshoot becomes credit for what follows */
    padded_ns += t1 - t0;
    if (debt_ns < -CREDIT_MAX_NS)
        debt_ns = -CREDIT_MAX_NS;
    idle_from_ns = t1;
    count(prof.spin ? "pad:spin" : "pad:sleep", 0, t1 - t0, want);
}

/* Work of `device` ns on the device that began `spent` ns before `now` here: owed by this thread.
 * Its thread was ready for it at `now - spent + debt` (where the thread's own device time stood);
 * on a node with a cores file it then waits for a core, and what is owed runs to its end there.
 * Without one (or with a core to spare) that is the debt plus the device's time minus what was
 * spent here. */
static void owe(int64_t now, int64_t spent, int64_t device) {
    if (cores && device > 0) {
        static struct stat_slot *queued_slot;
        int64_t queued = 0;
        debt_ns = claim_core(now - spent + debt_ns, device, &queued) - now;
        if (queued > 0) {
            if (!queued_slot)
                queued_slot = slot_for("cores:queued");
            count_in(queued_slot, 0, 0, queued);
        }
    } else {
        debt_ns += device - spent;
    }
    if (debt_ns < -CREDIT_MAX_NS)
        debt_ns = -CREDIT_MAX_NS;
}

/* An operation done here in `host` ns that takes `device` ns on the device. */
static void charge(const char *key, struct op *o, uint64_t bytes, int64_t host, double device) {
    if (o)
        count_op(o, bytes, host, (int64_t)device);
    else
        count(key, bytes, host, (int64_t)device);
    count_phase((int64_t)device);
    int64_t spent = 0, now = 0;
    if (!wrap_charged) {  /* the clock is read last: all the bookkeeping above is the device's time too */
        now = now_ns();
        spent = now - wrap_t0 + read_cost_ns;
        padded_ns += spent;  /* the device's time replaced it: not computation to scale again */
        wrap_charged = 1;
        /* Credit is lateness: time lost here that the device would not have lost (a late
         * wake-up, a preemption). Waiting - for the network, say - absorbs it, as the device
         * would have waited too, so a pause of a millisecond or more since the last charge takes
         * it away: it never carries into a later exchange. Shorter gaps are the program's own
         * work between two calls (a loop), which must not eat a sleep's overshoot. */
        int64_t idle = idle_from_ns ? wrap_t0 - idle_from_ns : 0;
        if (debt_ns < 0 && idle >= IDLE_MIN_NS)
            debt_ns = debt_ns + idle > 0 ? 0 : debt_ns + idle;
        idle_from_ns = now;
    } else if (cores) {
        now = now_ns();
    }
    owe(now, spent, (int64_t)device);
}

/* The device's time for operation `key` (bytes: 0 for a public-key operation), or - an operation
 * the profile does not know - the time here times the device's general CPU factor ("~" keys in
 * the counters). */
static void charge_op(const char *key, uint64_t bytes, int64_t host) {
    struct op *o = find_op(key);
    if (o) {
        charge(key, o, bytes, host, table_ns(o, (double)bytes));
    } else {
        char k[48];
        snprintf(k, sizeof k, "~%s", key);
        charge(k, NULL, bytes, host, (double)host * prof.cpu_factor);
    }
}

/* ---------------------------------------------------------------------------------------------
 * The library that called: its real functions and the helpers that read its objects. */

#define FN(ret, name, args) ret(*name) args
struct lib {
    const void *base;
    FN(int, EVP_PKEY_sign, (void *, unsigned char *, size_t *, const unsigned char *, size_t));
    FN(int, EVP_PKEY_verify, (void *, const unsigned char *, size_t, const unsigned char *, size_t));
    FN(int, EVP_PKEY_derive, (void *, unsigned char *, size_t *));
    FN(int, EVP_PKEY_keygen, (void *, void **));
    FN(int, EVP_PKEY_generate, (void *, void **));
    FN(int, EVP_PKEY_encrypt, (void *, unsigned char *, size_t *, const unsigned char *, size_t));
    FN(int, EVP_PKEY_decrypt, (void *, unsigned char *, size_t *, const unsigned char *, size_t));
    FN(int, EVP_DigestSign, (void *, unsigned char *, size_t *, const unsigned char *, size_t));
    FN(int, EVP_DigestVerify, (void *, const unsigned char *, size_t, const unsigned char *, size_t));
    FN(int, EVP_DigestSignUpdate, (void *, const void *, size_t));
    FN(int, EVP_DigestVerifyUpdate, (void *, const void *, size_t));
    FN(int, EVP_DigestSignFinal, (void *, unsigned char *, size_t *));
    FN(int, EVP_DigestVerifyFinal, (void *, const unsigned char *, size_t));
    FN(int, EVP_DigestUpdate, (void *, const void *, size_t));
    FN(int, EVP_Digest, (const void *, size_t, unsigned char *, unsigned int *, const void *, void *));
    FN(int, EVP_CipherUpdate, (void *, unsigned char *, int *, const unsigned char *, int));
    FN(int, EVP_EncryptUpdate, (void *, unsigned char *, int *, const unsigned char *, int));
    FN(int, EVP_DecryptUpdate, (void *, unsigned char *, int *, const unsigned char *, int));
    FN(int, EVP_Cipher, (void *, unsigned char *, const unsigned char *, unsigned int));
    FN(int, EVP_KDF_derive, (void *, unsigned char *, size_t, const void *));
    FN(int, EVP_CipherInit_ex, (void *, const void *, void *, const unsigned char *, const unsigned char *, int));
    FN(int, EVP_EncryptInit_ex, (void *, const void *, void *, const unsigned char *, const unsigned char *));
    FN(int, EVP_DecryptInit_ex, (void *, const void *, void *, const unsigned char *, const unsigned char *));
    FN(int, EVP_CipherInit_ex2, (void *, const void *, const unsigned char *, const unsigned char *, int, const void *));
    FN(int, EVP_EncryptInit_ex2, (void *, const void *, const unsigned char *, const unsigned char *, const void *));
    FN(int, EVP_DecryptInit_ex2, (void *, const void *, const unsigned char *, const unsigned char *, const void *));
    FN(int, EVP_CipherFinal_ex, (void *, unsigned char *, int *));
    FN(int, EVP_EncryptFinal_ex, (void *, unsigned char *, int *));
    FN(int, EVP_DecryptFinal_ex, (void *, unsigned char *, int *));
    FN(int, EVP_CIPHER_CTX_ctrl, (void *, int, int, void *));
    FN(int, EVP_DigestInit_ex, (void *, const void *, void *));
    FN(int, EVP_DigestFinal_ex, (void *, unsigned char *, unsigned int *));
    FN(int, X509_verify_cert, (void *));
    FN(int, SSL_connect, (void *));
    FN(int, SSL_do_handshake, (void *));
    FN(int, SSL_read, (void *, void *, int));
    FN(int, SSL_read_ex, (void *, void *, size_t, size_t *));
    FN(int, SSL_write, (void *, const void *, int));
    FN(int, SSL_write_ex, (void *, const void *, size_t, size_t *));
    FN(void, SSL_free, (void *));
    FN(int, BIO_write, (void *, const void *, int));
    FN(int, BIO_write_ex, (void *, const void *, size_t, size_t *));
    FN(int, BIO_read, (void *, void *, int));
    FN(int, BIO_read_ex, (void *, void *, size_t, size_t *));
    /* helpers */
    FN(void *, EVP_PKEY_CTX_get0_pkey, (void *));
    FN(int, EVP_PKEY_get_base_id, (const void *));
    FN(int, EVP_PKEY_get_bits, (const void *));
    FN(int, EVP_PKEY_get_group_name, (const void *, char *, size_t, size_t *));
    FN(const char *, EVP_PKEY_get0_type_name, (const void *));
    FN(void *, EVP_MD_CTX_get_pkey_ctx, (const void *));
    FN(const void *, EVP_MD_CTX_get0_md, (const void *));
    FN(int, EVP_MD_get_type, (const void *));
    FN(const char *, OBJ_nid2sn, (int));
    FN(const void *, EVP_CIPHER_CTX_get0_cipher, (const void *));
    FN(const char *, EVP_CIPHER_get0_name, (const void *));
    FN(void *, X509_STORE_CTX_get0_chain, (const void *));
    FN(int, OPENSSL_sk_num, (const void *));
    FN(void *, OPENSSL_sk_value, (const void *, int));
    FN(void *, X509_get0_pubkey, (const void *));
    FN(int, SSL_in_before, (const void *));
    FN(int, SSL_is_init_finished, (const void *));
    FN(int, SSL_is_server, (const void *));
    FN(int, SSL_session_reused, (const void *));
    FN(int, SSL_get_state, (const void *));
    FN(int, SSL_version, (const void *));
    FN(const void *, EVP_KDF_CTX_kdf, (void *));
    FN(const char *, EVP_KDF_get0_name, (const void *));
};

#define MAX_LIBS 8
static struct lib libs[MAX_LIBS];
static int n_libs;
static pthread_mutex_t libs_lock = PTHREAD_MUTEX_INITIALIZER;

static void *resolve(void *handle, const char *name, void *mine) {
    void *p = handle ? dlsym(handle, name) : NULL;
    if (p == NULL || p == mine)  /* the main program's scope starts with us: take the next one */
        p = dlsym(RTLD_NEXT, name);
    return p == mine ? NULL : p;
}

static void fill(struct lib *l, void *h);

/* Which library a return address lies in: dladdr takes the loader's lock and walks its maps
 * (tens of microseconds in the UML guest), so the answer is cached per call site - every site,
 * fully associative: a hashed cache let two hot sites of one loop (EVP_Digest and the
 * EVP_DigestUpdate inside it) evict each other whenever address randomisation made them collide. */
#define SITES 64
static __thread struct { const void *caller; struct lib *lib; } sites[SITES];
static __thread unsigned n_sites;
/* A real function that ends in a tail call to another interposed one (OpenSSL's EVP_CipherUpdate
 * jumps to EVP_EncryptUpdate) leaves the return address inside this library's own wrapper: that
 * call comes from the library the wrapper just called into, the last one this thread looked up
 * (a site of ours is cached as NULL: whichever library it was, it is resolved again each time). */
static __thread struct lib *last_lib;
static const void *self_base;

static struct lib *lib_of(const void *caller) {
    for (unsigned i = 0; i < n_sites; i++)
        if (sites[i].caller == caller) {
            if (sites[i].lib)
                last_lib = sites[i].lib;
            return last_lib ? last_lib : &libs[0];
        }
    unsigned h = n_sites < SITES ? n_sites++ : (unsigned)((uintptr_t)caller >> 4) % SITES;
    Dl_info info;
    const void *base = NULL;
    const char *file = NULL;
    if (dladdr(caller, &info) && info.dli_fbase) {
        base = info.dli_fbase;
        file = info.dli_fname;
    }
    if (!self_base && dladdr((void *)lib_of, &info))
        self_base = info.dli_fbase;
    if (base && base == self_base) {
        sites[h].caller = caller;
        sites[h].lib = NULL;
        return last_lib ? last_lib : &libs[0];
    }
    struct lib *found = NULL;
    pthread_mutex_lock(&libs_lock);
    for (int i = 0; i < n_libs && !found; i++)
        if (libs[i].base == base)
            found = &libs[i];
    if (!found && n_libs < MAX_LIBS) {
        found = &libs[n_libs];
        found->base = base;
        void *h = file && *file ? dlopen(file, RTLD_LAZY | RTLD_NOLOAD) : NULL;
        fill(found, h);
        n_libs++;
    }
    pthread_mutex_unlock(&libs_lock);
    if (!found)
        found = &libs[0];
    sites[h].caller = caller;
    sites[h].lib = found;
    last_lib = found;
    return found;
}

/* ---------------------------------------------------------------------------------------------
 * Naming what a call works on, as the profile's keys do. */

#define NID_RSA 6
#define NID_RSA_PSS 912
#define NID_EC 408
#define NID_DH 28
#define NID_DHX 920
#define NID_X25519 1034
#define NID_X448 1035
#define NID_ED25519 1087
#define NID_ED448 1088
#define NID_HMAC 855

static void lower(char *s) {
    for (; *s; s++)
        *s = (char)tolower((unsigned char)*s);
}

/* "rsa2048", "p256", "x25519", ...; "" when unknown. Returns the key type's NID. */
static int pkey_name(struct lib *l, const void *pkey, char *out, size_t n) {
    out[0] = 0;
    if (!pkey || !l->EVP_PKEY_get_base_id)
        return 0;
    int id = l->EVP_PKEY_get_base_id(pkey);
    switch (id) {
    case NID_RSA:
    case NID_RSA_PSS:
        snprintf(out, n, "rsa%d", l->EVP_PKEY_get_bits ? l->EVP_PKEY_get_bits(pkey) : 0);
        break;
    case NID_DH:
    case NID_DHX:
        snprintf(out, n, "dh%d", l->EVP_PKEY_get_bits ? l->EVP_PKEY_get_bits(pkey) : 0);
        break;
    case NID_EC: {
        char g[64] = "";
        size_t len = 0;
        if (l->EVP_PKEY_get_group_name)
            l->EVP_PKEY_get_group_name(pkey, g, sizeof g, &len);
        if (!strcmp(g, "prime256v1") || !strcmp(g, "P-256"))
            snprintf(out, n, "p256");
        else if (!strcmp(g, "secp384r1") || !strcmp(g, "P-384"))
            snprintf(out, n, "p384");
        else if (!strcmp(g, "secp521r1") || !strcmp(g, "P-521"))
            snprintf(out, n, "p521");
        else
            snprintf(out, n, "ec-%s", g);
        break;
    }
    case NID_X25519: snprintf(out, n, "x25519"); break;
    case NID_X448: snprintf(out, n, "x448"); break;
    case NID_ED25519: snprintf(out, n, "ed25519"); break;
    case NID_ED448: snprintf(out, n, "ed448"); break;
    case NID_HMAC: snprintf(out, n, "hmac"); break;
    default:
        if (l->EVP_PKEY_get0_type_name && l->EVP_PKEY_get0_type_name(pkey))
            snprintf(out, n, "%s", l->EVP_PKEY_get0_type_name(pkey));
        lower(out);
    }
    return id;
}

static void md_name(struct lib *l, const void *md, char *out, size_t n) {
    out[0] = 0;
    if (md && l->EVP_MD_get_type && l->OBJ_nid2sn) {
        const char *sn = l->OBJ_nid2sn(l->EVP_MD_get_type(md));
        if (sn)
            snprintf(out, n, "%s", sn);
    }
    lower(out);
}

static void charge_digest(struct lib *l, const void *md, uint64_t bytes, int64_t host) {
    char name[40], key[48];
    md_name(l, md, name, sizeof name);
    if (!name[0])
        return;
    if (!strcmp(name, "md5-sha1")) {  /* TLS 1.0/1.1's handshake hash: both, each host half */
        charge_op("digest:md5", bytes, host / 2);
        charge_op("digest:sha1", bytes, host - host / 2);
        return;
    }
    snprintf(key, sizeof key, "digest:%s", name);
    charge_op(key, bytes, host);
}

static void charge_cipher(struct lib *l, const void *ctx, uint64_t bytes, int aad, int64_t host) {
    char name[48] = "", key[64];
    const void *c = l->EVP_CIPHER_CTX_get0_cipher ? l->EVP_CIPHER_CTX_get0_cipher(ctx) : NULL;
    if (c && l->EVP_CIPHER_get0_name && l->EVP_CIPHER_get0_name(c))
        snprintf(name, sizeof name, "%s", l->EVP_CIPHER_get0_name(c));
    lower(name);
    if (!name[0])
        return;
    /* A stitched cipher (TLS 1.2's AES-128-CBC-HMAC-SHA1 where AES-NI exists) does the record's
     * MAC inside the cipher: the device pays for both. */
    snprintf(key, sizeof key, "cipher:%s", name);
    char *hmac = strstr(name, "-hmac-");
    if (hmac) {
        char ckey[64], dkey[48];
        snprintf(dkey, sizeof dkey, "digest:%s", hmac + 6);
        *hmac = 0;
        snprintf(ckey, sizeof ckey, "cipher:%s", name);
        struct op *c = find_op(ckey), *d = find_op(dkey);
        if (c && d) {
            charge(ckey, c, bytes, host / 2, table_ns(c, (double)bytes));
            charge(dkey, d, bytes, host - host / 2, table_ns(d, (double)bytes));
            return;
        }
    }
    struct op *o = find_op(key);
    if (o && aad)
        charge(key, o, bytes, host, marginal_ns(o, (double)bytes));
    else
        charge_op(key, bytes, host);
}

/* ---------------------------------------------------------------------------------------------
 * The interposed functions. */

#define CALLER __builtin_return_address(0)
#define ACTIVE (prof.loaded && depth == 0)


/* What every EVP_PKEY_CTX operation does after the real call: charge the device's time for
 * `op` on the context's key type, pay it, hand back the real call's result. */
static int pkey_op_done(struct lib *l, void *ctx, const char *op, int64_t t0, int r) {
    int64_t host = now_ns() - t0;
    depth--;
    char k[40], key[48];
    pkey_name(l, l->EVP_PKEY_CTX_get0_pkey ? l->EVP_PKEY_CTX_get0_pkey(ctx) : NULL, k, sizeof k);
    snprintf(key, sizeof key, "%s:%s", op, k);
    charge_op(key, 0, host);
    pay(0);
    return r;
}

int EVP_PKEY_sign(void *ctx, unsigned char *sig, size_t *siglen, const unsigned char *tbs, size_t tbslen) {
    ENTER;
    struct lib *l = lib_of(CALLER);
    if (!ACTIVE || sig == NULL)  /* sig NULL: a length query */
        return l->EVP_PKEY_sign(ctx, sig, siglen, tbs, tbslen);
    BEGIN;
    int64_t t0 = entered_ns;
    int r = l->EVP_PKEY_sign(ctx, sig, siglen, tbs, tbslen);
    return pkey_op_done(l, ctx, "sign", t0, r);
}

int EVP_PKEY_verify(void *ctx, const unsigned char *sig, size_t siglen, const unsigned char *tbs, size_t tbslen) {
    ENTER;
    struct lib *l = lib_of(CALLER);
    if (!ACTIVE)
        return l->EVP_PKEY_verify(ctx, sig, siglen, tbs, tbslen);
    BEGIN;
    int64_t t0 = entered_ns;
    int r = l->EVP_PKEY_verify(ctx, sig, siglen, tbs, tbslen);
    return pkey_op_done(l, ctx, "verify", t0, r);
}

/* RSA key transport: the client encrypts (a public-key operation: a verify's cost), the server
 * decrypts (a private-key operation: a sign's). */
int EVP_PKEY_encrypt(void *ctx, unsigned char *out, size_t *outlen, const unsigned char *in, size_t inlen) {
    ENTER;
    struct lib *l = lib_of(CALLER);
    if (!ACTIVE || out == NULL)
        return l->EVP_PKEY_encrypt(ctx, out, outlen, in, inlen);
    BEGIN;
    int64_t t0 = entered_ns;
    int r = l->EVP_PKEY_encrypt(ctx, out, outlen, in, inlen);
    return pkey_op_done(l, ctx, "verify", t0, r);
}

int EVP_PKEY_decrypt(void *ctx, unsigned char *out, size_t *outlen, const unsigned char *in, size_t inlen) {
    ENTER;
    struct lib *l = lib_of(CALLER);
    if (!ACTIVE || out == NULL)
        return l->EVP_PKEY_decrypt(ctx, out, outlen, in, inlen);
    BEGIN;
    int64_t t0 = entered_ns;
    int r = l->EVP_PKEY_decrypt(ctx, out, outlen, in, inlen);
    return pkey_op_done(l, ctx, "sign", t0, r);
}

int EVP_PKEY_derive(void *ctx, unsigned char *key_out, size_t *keylen) {
    ENTER;
    struct lib *l = lib_of(CALLER);
    if (!ACTIVE || key_out == NULL)
        return l->EVP_PKEY_derive(ctx, key_out, keylen);
    BEGIN;
    int64_t t0 = entered_ns;
    int r = l->EVP_PKEY_derive(ctx, key_out, keylen);
    int64_t host = now_ns() - t0;
    depth--;
    char k[40], key[48];
    int id = pkey_name(l, l->EVP_PKEY_CTX_get0_pkey ? l->EVP_PKEY_CTX_get0_pkey(ctx) : NULL, k, sizeof k);
    if (id == NID_HMAC || !strcmp(k, "hmac") || !k[0]) {  /* not a key agreement (HKDF/TLS1-PRF contexts have no key) */
        snprintf(key, sizeof key, "kdf");
        charge_op(key, 0, host);
    } else {
        snprintf(key, sizeof key, "derive:%s", k);
        charge_op(key, 0, host);
    }
    pay(0);
    return r;
}

static int keygen_common(struct lib *l, int (*real)(void *, void **), void *ctx, void **ppkey) {
    if (!ACTIVE || ppkey == NULL)
        return real(ctx, ppkey);
    BEGIN;
    int64_t t0 = entered_ns;
    int r = real(ctx, ppkey);
    int64_t host = now_ns() - t0;
    depth--;
    char k[40], key[48];
    pkey_name(l, r > 0 ? *ppkey : NULL, k, sizeof k);
    snprintf(key, sizeof key, "keygen:%s", k[0] ? k : "unknown");
    charge_op(key, 0, host);
    pay(0);
    return r;
}

int EVP_PKEY_keygen(void *ctx, void **ppkey) {
    ENTER;
    struct lib *l = lib_of(CALLER);
    return keygen_common(l, l->EVP_PKEY_keygen, ctx, ppkey);
}

int EVP_PKEY_generate(void *ctx, void **ppkey) {
    ENTER;
    struct lib *l = lib_of(CALLER);
    return keygen_common(l, l->EVP_PKEY_generate, ctx, ppkey);
}

/* One-shot signatures (TLS's ServerKeyExchange and CertificateVerify, EdDSA): the signature
 * operation plus hashing the signed data. */
static void charge_sig(struct lib *l, void *mctx, const char *what, size_t tbslen, int64_t host) {
    char k[40], key[48];
    void *pctx = l->EVP_MD_CTX_get_pkey_ctx ? l->EVP_MD_CTX_get_pkey_ctx(mctx) : NULL;
    int id = pkey_name(l, pctx && l->EVP_PKEY_CTX_get0_pkey ? l->EVP_PKEY_CTX_get0_pkey(pctx) : NULL, k, sizeof k);
    const void *md = l->EVP_MD_CTX_get0_md ? l->EVP_MD_CTX_get0_md(mctx) : NULL;
    if (id == NID_HMAC || !strcmp(k, "hmac")) {  /* an HMAC "signature": the digest's bytes */
        charge_digest(l, md, tbslen, host);
        return;
    }
    snprintf(key, sizeof key, "%s:%s", what, k[0] ? k : "unknown");
    struct op *o = find_op(key);
    char dname[40], dkey[48];
    md_name(l, md, dname, sizeof dname);
    snprintf(dkey, sizeof dkey, "digest:%s", dname);
    const struct op *d = dname[0] ? find_op(dkey) : NULL;
    if (o)
        charge(key, o, 0, host, table_ns(o, 0) + (d && tbslen ? table_ns(d, (double)tbslen) : 0));
    else
        charge_op(key, 0, host);
}

int EVP_DigestSign(void *mctx, unsigned char *sig, size_t *siglen, const unsigned char *tbs, size_t tbslen) {
    ENTER;
    struct lib *l = lib_of(CALLER);
    if (!ACTIVE || sig == NULL)
        return l->EVP_DigestSign(mctx, sig, siglen, tbs, tbslen);
    BEGIN;
    int64_t t0 = entered_ns;
    int r = l->EVP_DigestSign(mctx, sig, siglen, tbs, tbslen);
    int64_t host = now_ns() - t0;
    depth--;
    charge_sig(l, mctx, "sign", tbslen, host);
    pay(0);
    return r;
}

int EVP_DigestVerify(void *mctx, const unsigned char *sig, size_t siglen, const unsigned char *tbs, size_t tbslen) {
    ENTER;
    struct lib *l = lib_of(CALLER);
    if (!ACTIVE)
        return l->EVP_DigestVerify(mctx, sig, siglen, tbs, tbslen);
    BEGIN;
    int64_t t0 = entered_ns;
    int r = l->EVP_DigestVerify(mctx, sig, siglen, tbs, tbslen);
    int64_t host = now_ns() - t0;
    depth--;
    charge_sig(l, mctx, "verify", tbslen, host);
    pay(0);
    return r;
}

int EVP_DigestSignFinal(void *mctx, unsigned char *sig, size_t *siglen) {
    ENTER;
    struct lib *l = lib_of(CALLER);
    if (!ACTIVE || sig == NULL)
        return l->EVP_DigestSignFinal(mctx, sig, siglen);
    BEGIN;
    int64_t t0 = entered_ns;
    int r = l->EVP_DigestSignFinal(mctx, sig, siglen);
    int64_t host = now_ns() - t0;
    depth--;
    charge_sig(l, mctx, "sign", 0, host);  /* the data was charged by the updates */
    pay(0);
    return r;
}

int EVP_DigestVerifyFinal(void *mctx, const unsigned char *sig, size_t siglen) {
    ENTER;
    struct lib *l = lib_of(CALLER);
    if (!ACTIVE)
        return l->EVP_DigestVerifyFinal(mctx, sig, siglen);
    BEGIN;
    int64_t t0 = entered_ns;
    int r = l->EVP_DigestVerifyFinal(mctx, sig, siglen);
    int64_t host = now_ns() - t0;
    depth--;
    charge_sig(l, mctx, "verify", 0, host);
    pay(0);
    return r;
}

static int digest_update(struct lib *l, int (*real)(void *, const void *, size_t), void *mctx, const void *d, size_t n) {
    if (!ACTIVE)
        return real(mctx, d, n);
    BEGIN;
    int64_t t0 = entered_ns;
    int r = real(mctx, d, n);
    int64_t host = now_ns() - t0;
    depth--;
    charge_digest(l, l->EVP_MD_CTX_get0_md ? l->EVP_MD_CTX_get0_md(mctx) : NULL, n, host);
    pay(0);
    return r;
}

int EVP_DigestUpdate(void *mctx, const void *d, size_t n) {
    ENTER;
    struct lib *l = lib_of(CALLER);
    return digest_update(l, l->EVP_DigestUpdate, mctx, d, n);
}

int EVP_DigestSignUpdate(void *mctx, const void *d, size_t n) {
    ENTER;
    struct lib *l = lib_of(CALLER);
    return digest_update(l, l->EVP_DigestSignUpdate, mctx, d, n);
}

int EVP_DigestVerifyUpdate(void *mctx, const void *d, size_t n) {
    ENTER;
    struct lib *l = lib_of(CALLER);
    return digest_update(l, l->EVP_DigestVerifyUpdate, mctx, d, n);
}

int EVP_Digest(const void *data, size_t count_, unsigned char *md, unsigned int *size, const void *type, void *impl) {
    ENTER;
    struct lib *l = lib_of(CALLER);
    if (!ACTIVE)
        return l->EVP_Digest(data, count_, md, size, type, impl);
    BEGIN;
    int64_t t0 = entered_ns;
    int r = l->EVP_Digest(data, count_, md, size, type, impl);
    int64_t host = now_ns() - t0;
    depth--;
    charge_digest(l, type, count_, host);
    pay(0);
    return r;
}

static int cipher_update(struct lib *l, int (*real)(void *, unsigned char *, int *, const unsigned char *, int),
                         void *ctx, unsigned char *out, int *outl, const unsigned char *in, int inl) {
    if (!ACTIVE)
        return real(ctx, out, outl, in, inl);
    BEGIN;
    int64_t t0 = entered_ns;
    int r = real(ctx, out, outl, in, inl);
    int64_t host = now_ns() - t0;
    depth--;
    if (inl > 0)
        charge_cipher(l, ctx, (uint64_t)inl, out == NULL, host);  /* out NULL: AEAD's additional data */
    pay(0);
    return r;
}

int EVP_CipherUpdate(void *ctx, unsigned char *out, int *outl, const unsigned char *in, int inl) {
    ENTER;
    struct lib *l = lib_of(CALLER);
    return cipher_update(l, l->EVP_CipherUpdate, ctx, out, outl, in, inl);
}

int EVP_EncryptUpdate(void *ctx, unsigned char *out, int *outl, const unsigned char *in, int inl) {
    ENTER;
    struct lib *l = lib_of(CALLER);
    return cipher_update(l, l->EVP_EncryptUpdate, ctx, out, outl, in, inl);
}

int EVP_DecryptUpdate(void *ctx, unsigned char *out, int *outl, const unsigned char *in, int inl) {
    ENTER;
    struct lib *l = lib_of(CALLER);
    return cipher_update(l, l->EVP_DecryptUpdate, ctx, out, outl, in, inl);
}

int EVP_Cipher(void *ctx, unsigned char *out, const unsigned char *in, unsigned int inl) {
    ENTER;
    struct lib *l = lib_of(CALLER);
    if (!ACTIVE)
        return l->EVP_Cipher(ctx, out, in, inl);
    BEGIN;
    int64_t t0 = entered_ns;
    int r = l->EVP_Cipher(ctx, out, in, inl);
    int64_t host = now_ns() - t0;
    depth--;
    if (inl > 0)
        charge_cipher(l, ctx, inl, out == NULL, host);
    pay(0);
    return r;
}

/* Setting a cipher or digest up and finishing it (an IV, a tag, a final block) belongs to the
 * operation it serves: the device's tables time the whole loop `openssl speed` runs (init,
 * update, final per block), so these calls cost the device nothing of their own and give back
 * the time they took here. */
static void credit(void) {
    if (!wrap_charged) {
        int64_t now = now_ns();
        debt_ns -= now - wrap_t0 + read_cost_ns;
        wrap_charged = 1;
        if (debt_ns < -CREDIT_MAX_NS)
            debt_ns = -CREDIT_MAX_NS;
        idle_from_ns = now;  /* busy, not idle: the next charge must not take this back */
    }
}

#define CREDITED(name, params, args)                 \
    int name params {                               \
        ENTER;                                      \
        struct lib *l = lib_of(CALLER);             \
        if (!ACTIVE)                                \
            return l->name args;                    \
        BEGIN;                                      \
        int r = l->name args;                       \
        depth--;                                    \
        credit();                                   \
        return r;                                   \
    }

CREDITED(EVP_CipherInit_ex, (void *c, const void *t, void *e, const unsigned char *k, const unsigned char *iv, int enc),
         (c, t, e, k, iv, enc))
CREDITED(EVP_EncryptInit_ex, (void *c, const void *t, void *e, const unsigned char *k, const unsigned char *iv),
         (c, t, e, k, iv))
CREDITED(EVP_DecryptInit_ex, (void *c, const void *t, void *e, const unsigned char *k, const unsigned char *iv),
         (c, t, e, k, iv))
CREDITED(EVP_CipherInit_ex2, (void *c, const void *t, const unsigned char *k, const unsigned char *iv, int enc,
                              const void *p), (c, t, k, iv, enc, p))
CREDITED(EVP_EncryptInit_ex2, (void *c, const void *t, const unsigned char *k, const unsigned char *iv, const void *p),
         (c, t, k, iv, p))
CREDITED(EVP_DecryptInit_ex2, (void *c, const void *t, const unsigned char *k, const unsigned char *iv, const void *p),
         (c, t, k, iv, p))
CREDITED(EVP_CipherFinal_ex, (void *c, unsigned char *out, int *outl), (c, out, outl))
CREDITED(EVP_EncryptFinal_ex, (void *c, unsigned char *out, int *outl), (c, out, outl))
CREDITED(EVP_DecryptFinal_ex, (void *c, unsigned char *out, int *outl), (c, out, outl))
CREDITED(EVP_CIPHER_CTX_ctrl, (void *c, int type, int arg, void *ptr), (c, type, arg, ptr))
CREDITED(EVP_DigestInit_ex, (void *c, const void *t, void *e), (c, t, e))
CREDITED(EVP_DigestFinal_ex, (void *c, unsigned char *md, unsigned int *n), (c, md, n))

/* ---------------------------------------------------------------------------------------------
 * Key derivation: TLS 1.0-1.2's PRF, TLS 1.3's key schedule (OpenSSL's TLS13-KDF) and HKDF (QUIC
 * stacks). No table times them, and timing them here made a few microseconds of hashing a hostage
 * to the host's scheduler: one preemption inside a PRF call, times the device's CPU factor, added
 * milliseconds to a handshake (CI saw 1.9 ms on the watch's 128 ms). They are HMACs of short
 * inputs, so the device's time is the HMACs' digest calls priced by its digest table, each HMAC
 * two calls as RFC 2104 writes it - H(K^opad || H(K^ipad || m)): b + |m| bytes, then b + h (b the
 * digest's block, h its output) - with a key longer than b hashed first. libssl hands every input
 * to EVP_KDF_derive in its parameters, which is where the lengths are read. A KDF or digest the
 * profile cannot price costs the time here times the general CPU factor ("~kdf"), as before. */

/* OpenSSL 3's OSSL_PARAM (openssl/core.h): a stable ABI. */
struct ossl_param {
    const char *key;
    unsigned int data_type;       /* 1 integer, 4 UTF-8 string, 5 octet string */
    void *data;
    size_t data_size, return_size;
};

struct kdf_inputs {
    char digest[40];
    double secret, seed, key, salt, info, prefix, label, data;
    int has_key, has_salt, mode;   /* mode: 0 extract and expand, 1 extract only, 2 expand only */
};

struct hmac_digest {
    struct op *table;
    double h, b;                  /* output and block bytes */
};

static int digest_of(const char *name, struct hmac_digest *d) {
    static const struct { const char *name, *key; double h, b; } known[] = {
        {"md5", "digest:md5", 16, 64}, {"sha1", "digest:sha1", 20, 64},
        {"sha2-224", "digest:sha224", 28, 64}, {"sha2-256", "digest:sha256", 32, 64},
        {"sha2-384", "digest:sha384", 48, 128}, {"sha2-512", "digest:sha512", 64, 128},
        {"sha224", "digest:sha224", 28, 64}, {"sha256", "digest:sha256", 32, 64},
        {"sha384", "digest:sha384", 48, 128}, {"sha512", "digest:sha512", 64, 128},
        {"sha-1", "digest:sha1", 20, 64},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(name, known[i].name)) {
            d->table = find_op(known[i].key);
            d->h = known[i].h;
            d->b = known[i].b;
            return d->table != NULL;
        }
    return 0;
}

/* Output blocks of `len` bytes that make `out` bytes (at least one). */
static double blocks(double out, double len) {
    double n = (double)(long long)((out + len - 1) / len);
    return n < 1 ? 1 : n;
}

/* HMAC(K, m) with |K| = key, |m| = msg bytes, on the device (RFC 2104 section 2). */
static double hmac_ns(const struct hmac_digest *d, double key, double msg) {
    return (key > d->b ? table_ns(d->table, key) : 0) + table_ns(d->table, d->b + msg)
           + table_ns(d->table, d->b + d->h);
}

/* P_hash(secret, seed) to `out` bytes (RFC 5246 section 5): A(1) = HMAC(seed), A(i) = HMAC(A(i-1)),
 * each output block HMAC(A(i) || seed). */
static double p_hash_ns(const struct hmac_digest *d, double secret, double seed, double out) {
    double n = blocks(out, d->h);
    return hmac_ns(d, secret, seed) + (n - 1) * hmac_ns(d, secret, d->h) + n * hmac_ns(d, secret, d->h + seed);
}

/* HKDF-Expand(PRK, info, out) (RFC 5869 section 2.3): T(i) = HMAC(PRK, T(i-1) || info || i), T(0) empty. */
static double hkdf_expand_ns(const struct hmac_digest *d, double prk, double info, double out) {
    double n = blocks(out, d->h);
    return hmac_ns(d, prk, info + 1) + (n - 1) * hmac_ns(d, prk, d->h + info + 1);
}

static void kdf_read_params(const struct ossl_param *p, struct kdf_inputs *in) {
    for (; p && p->key; p++) {
        double n = (double)p->data_size;
        if (!strcmp(p->key, "digest") && p->data_type == 4 && p->data) {
            snprintf(in->digest, sizeof in->digest, "%.*s",
                     (int)(p->data_size ? p->data_size : strlen(p->data)), (const char *)p->data);
            lower(in->digest);
        } else if (!strcmp(p->key, "mode") && p->data) {
            if (p->data_type == 1 && p->data_size == sizeof(int))
                in->mode = *(const int *)p->data;
            else if (p->data_type == 4)
                in->mode = !strncmp(p->data, "EXTRACT_ONLY", 12) ? 1 : !strncmp(p->data, "EXPAND_ONLY", 11) ? 2 : 0;
        } else {
            /* The inputs whose lengths price it: a parameter given twice (TLS 1-PRF's seeds,
             * HKDF's info) adds up, as the KDF concatenates them. */
            const struct { const char *key; double *len; int *given; } sizes[] = {
                {"secret", &in->secret, NULL}, {"seed", &in->seed, NULL}, {"key", &in->key, &in->has_key},
                {"salt", &in->salt, &in->has_salt}, {"info", &in->info, NULL}, {"prefix", &in->prefix, NULL},
                {"label", &in->label, NULL}, {"data", &in->data, NULL},
            };
            for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
                if (!strcmp(p->key, sizes[i].key)) {
                    *sizes[i].len += n;
                    if (sizes[i].given)
                        *sizes[i].given = 1;
                }
        }
    }
}

/* The device's time for one derivation, or -1 where it cannot be priced. */
static double kdf_ns(const char *kdf, const struct kdf_inputs *in, double out) {
    struct hmac_digest d, md5, sha1;
    if (!strcmp(kdf, "tls1-prf")) {
        if (!strcmp(in->digest, "md5-sha1")) {  /* TLS 1.0/1.1: the secret's halves through both */
            if (!digest_of("md5", &md5) || !digest_of("sha1", &sha1))
                return -1;
            double half = blocks(in->secret, 2);  /* RFC 2246 5: ceil(|S| / 2) bytes each */
            return p_hash_ns(&md5, half, in->seed, out) + p_hash_ns(&sha1, half, in->seed, out);
        }
        return digest_of(in->digest, &d) ? p_hash_ns(&d, in->secret, in->seed, out) : -1;
    }
    if (!digest_of(in->digest, &d))
        return -1;
    double ikm = in->has_key ? in->key : d.h;
    if (!strcmp(kdf, "hkdf")) {
        double salt = in->has_salt ? in->salt : d.h;   /* no salt: h zero bytes */
        if (in->mode == 1)
            return hmac_ns(&d, salt, ikm);
        if (in->mode == 2)
            return hkdf_expand_ns(&d, in->key, in->info, out);
        return hmac_ns(&d, salt, ikm) + hkdf_expand_ns(&d, d.h, in->info, out);
    }
    if (!strcmp(kdf, "tls13-kdf")) {
        /* RFC 8446 7.1: HKDF-Expand-Label's info is HkdfLabel - length (2), the label's length
         * (1), "tls13 " || label, the context's length (1) and the context. */
        if (in->mode == 2)
            return hkdf_expand_ns(&d, in->key, 2 + 1 + in->prefix + in->label + 1 + in->data, out);
        /* Extract: from a previous secret (the salt) OpenSSL first derives Derive-Secret(salt,
         * "derived", "") - the empty transcript's hash, then an expand with it as context. */
        double pre = 0;
        if (in->has_salt && in->salt > 0)
            pre = table_ns(d.table, 0) + hkdf_expand_ns(&d, in->salt, 2 + 1 + in->prefix + in->label + 1 + d.h, d.h);
        return pre + hmac_ns(&d, d.h, ikm);
    }
    return -1;
}

int EVP_KDF_derive(void *ctx, unsigned char *key_out, size_t keylen, const void *params) {
    ENTER;
    struct lib *l = lib_of(CALLER);
    if (!ACTIVE)
        return l->EVP_KDF_derive(ctx, key_out, keylen, params);
    BEGIN;
    int64_t t0 = entered_ns;
    int r = l->EVP_KDF_derive(ctx, key_out, keylen, params);
    int64_t host = now_ns() - t0;
    depth--;
    char kdf[32] = "";
    const void *k = l->EVP_KDF_CTX_kdf ? l->EVP_KDF_CTX_kdf(ctx) : NULL;
    if (k && l->EVP_KDF_get0_name && l->EVP_KDF_get0_name(k))
        snprintf(kdf, sizeof kdf, "%s", l->EVP_KDF_get0_name(k));
    lower(kdf);
    struct kdf_inputs in = {0};
    kdf_read_params(params, &in);
    double device = kdf[0] && params ? kdf_ns(kdf, &in, (double)keylen) : -1;
    if (device >= 0) {
        char key[48];
        snprintf(key, sizeof key, "kdf:%s", kdf);
        charge(key, NULL, keylen, host, device);
    } else {
        charge_op("kdf", keylen, host);
    }
    pay(0);
    return r;
}

/* A certificate chain: one signature verification per certificate below the trust anchor, with
 * its issuer's key (the anchor's own self-signature is not checked, as OpenSSL does not). */
int X509_verify_cert(void *ctx) {
    ENTER;
    struct lib *l = lib_of(CALLER);
    if (!ACTIVE)
        return l->X509_verify_cert(ctx);
    BEGIN;
    int64_t t0 = entered_ns;
    int r = l->X509_verify_cert(ctx);
    int64_t host = now_ns() - t0;
    depth--;
    void *chain = l->X509_STORE_CTX_get0_chain ? l->X509_STORE_CTX_get0_chain(ctx) : NULL;
    int n = chain && l->OPENSSL_sk_num ? l->OPENSSL_sk_num(chain) : 0;
    double device = 0;
    int unknown = 0;
    char k[40], key[48];
    for (int i = 0; i + 1 < n; i++) {
        void *issuer = l->OPENSSL_sk_value(chain, i + 1);
        pkey_name(l, issuer && l->X509_get0_pubkey ? l->X509_get0_pubkey(issuer) : NULL, k, sizeof k);
        snprintf(key, sizeof key, "verify:%s", k);
        const struct op *o = find_op(key);
        if (o)
            device += table_ns(o, 0);
        else
            unknown = 1;
    }
    if (unknown || n < 2)  /* an unknown key, or nothing verified: the time here x the factor */
        charge("~x509-chain", NULL, 0, host, (double)host * prof.cpu_factor + device);
    else
        charge("x509-chain", NULL, (uint64_t)(n - 1), host, device);
    pay(0);
    return r;
}

/* ---- the platform's cost per byte of data the application receives ----
 *
 * `data:plain` / `data:encrypted` from the profile (wearlab.model.devices: Device.per_byte),
 * charged only in a process that asks (WEARLAB_DEVICE_PER_BYTE=1: the application's data path,
 * the fetch agent - not a relaying proxy). The device's time for the bytes is owed like any
 * operation's (on the node's cores) and paid by sleeping: the application takes the device's
 * time to consume what it received, and TCP's receive window carries that rate to the sender. */

static int per_byte_mode;
static struct op *data_plain, *data_encrypted;

static void charge_data(struct op *o, uint64_t bytes) {
    if (!per_byte_mode || !o || bytes == 0 || depth > 0)
        return;
    int64_t ns = (int64_t)table_ns(o, (double)bytes);
    count_op(o, bytes, 0, ns);
    count_phase(ns);
    owe(now_ns(), 0, ns);
    pay(0);
}

/* ---- the handshake's platform cost ----
 *
 * Charged to the client of a TLS handshake only (SSL_is_server false), once per handshake: the
 * full handshake's cost, or a resumed one's (SSL_session_reused) - the profile's handshake_ns and
 * resumed_handshake_ns (TLS 1.2's abbreviated handshake: abbreviated_handshake_ns). Where:
 * before the client's second flight leaves - the first BIO write
 * after the server's flight was read within the handshake, where seed 000 puts ~87 % of the
 * watch's handshake - and, for a handshake that writes no such flight through a BIO (a QUIC
 * stack's, handed over in callbacks) or that the table had no room for, when it completes: the
 * interposed call that finds it finished after it was not before. */

#define TLS1_3_VERSION 0x0304

static void charge_platform(struct lib *l, void *ssl, struct hs *h) {
    int resumed = l->SSL_session_reused ? l->SSL_session_reused(ssl) == 1 : 0;
    /* TLS 1.2's abbreviated handshake (RFC 5246 7.3) computes no key exchange and no certificate:
     * its own figure (abbreviated_handshake_ns) */
    int abbreviated = resumed && l->SSL_version && l->SSL_version(ssl) < TLS1_3_VERSION;
    int64_t ns = (int64_t)(abbreviated ? prof.abbreviated_ns : resumed ? prof.resumed_ns : prof.handshake_ns);
    if (h)
        h->charged = 1;
    owe(now_ns(), 0, ns);
    count(abbreviated ? "platform:abbreviated-handshake" : resumed ? "platform:resumed-handshake" : "platform:handshake",
          0, 0, ns);
    count_phase(ns);
}

struct hs_step { struct hs *saved; struct lib *saved_lib; void *ssl; struct lib *lib; int tracked; };
static __thread struct lib *hs_lib;  /* the library of the handshake hs_now is */

/* Entering a call that may drive a client's handshake (`connect`: SSL_connect, which makes it a
 * client whatever its method said). */
static struct hs_step hs_begin(struct lib *l, void *ssl, int connect) {
    struct hs_step st = {hs_now, hs_lib, ssl, l, 0};
    if (!prof.loaded || depth > 0 || !ssl || !l->SSL_is_init_finished || l->SSL_is_init_finished(ssl))
        return st;
    if (!connect && l->SSL_is_server && l->SSL_is_server(ssl))
        return st;
    st.tracked = 1;
    in_hs++;
    hs_now = hs_enter(ssl, l->SSL_in_before ? l->SSL_in_before(ssl) : 0);
    hs_lib = l;
    return st;
}

static void hs_end(struct hs_step *st) {
    if (!st->tracked)
        return;
    struct hs *h = hs_now;
    if (st->lib->SSL_is_init_finished(st->ssl)) {
        if (!h || !h->charged)
            charge_platform(st->lib, st->ssl, h);
        if (h)  /* its slot is free again (only this thread touches the entry meanwhile) */
            __atomic_store_n(&h->ssl, NULL, __ATOMIC_RELEASE);
        pay(1);
    }
    hs_now = st->saved;
    hs_lib = st->saved_lib;
    in_hs--;
}

int SSL_connect(void *ssl) {
    struct lib *l = lib_of(CALLER);
    struct hs_step st = hs_begin(l, ssl, 1);
    in_ssl++;
    int r = l->SSL_connect(ssl);
    in_ssl--;
    hs_end(&st);
    return r;
}

int SSL_do_handshake(void *ssl) {
    struct lib *l = lib_of(CALLER);
    struct hs_step st = hs_begin(l, ssl, 0);
    in_ssl++;
    int r = l->SSL_do_handshake(ssl);
    in_ssl--;
    hs_end(&st);
    return r;
}

/* A handshake the program leaves to its first read or write. */
int SSL_read(void *ssl, void *buf, int num) {
    struct lib *l = lib_of(CALLER);
    struct hs_step st = hs_begin(l, ssl, 0);
    in_ssl++;
    int r = l->SSL_read(ssl, buf, num);
    in_ssl--;
    hs_end(&st);
    if (r > 0)
        charge_data(data_encrypted, (uint64_t)r);
    return r;
}

int SSL_read_ex(void *ssl, void *buf, size_t num, size_t *readbytes) {
    struct lib *l = lib_of(CALLER);
    struct hs_step st = hs_begin(l, ssl, 0);
    in_ssl++;
    int r = l->SSL_read_ex(ssl, buf, num, readbytes);
    in_ssl--;
    hs_end(&st);
    if (r == 1 && readbytes && *readbytes > 0)
        charge_data(data_encrypted, *readbytes);
    return r;
}

int SSL_write(void *ssl, const void *buf, int num) {
    struct lib *l = lib_of(CALLER);
    struct hs_step st = hs_begin(l, ssl, 0);
    in_ssl++;
    int r = l->SSL_write(ssl, buf, num);
    in_ssl--;
    hs_end(&st);
    return r;
}

int SSL_write_ex(void *ssl, const void *buf, size_t num, size_t *written) {
    struct lib *l = lib_of(CALLER);
    struct hs_step st = hs_begin(l, ssl, 0);
    in_ssl++;
    int r = l->SSL_write_ex(ssl, buf, num, written);
    in_ssl--;
    hs_end(&st);
    return r;
}

/* A connection freed in the middle of its handshake (an error, a timeout) leaves the table. */
void SSL_free(void *ssl) {
    struct lib *l = lib_of(CALLER);
    if (prof.loaded && ssl)
        hs_forget(ssl);
    l->SSL_free(ssl);
}

/* OpenSSL's OSSL_HANDSHAKE_STATE (ssl.h; an enum that only grows) for what a client writes. */
#define TLS_ST_CW_CERT 13
#define TLS_ST_CW_CHANGE 16
#define TLS_ST_CW_FINISHED 18

/* Is what the client writes now its second flight: a certificate, its key exchange, a
 * certificate verify, Finished - or TLS 1.2's ChangeCipherSpec, which opens an abbreviated
 * handshake's flight? (TLS 1.3's ChangeCipherSpec is the compatibility mode's dummy, written as
 * soon as the ServerHello is read, before the rest of the server's flight.) */
static int second_flight(struct lib *l, const void *ssl) {
    if (!l->SSL_get_state)
        return 1;
    int st = l->SSL_get_state(ssl);
    if (st == TLS_ST_CW_CHANGE)
        return l->SSL_version && l->SSL_version(ssl) < TLS1_3_VERSION;
    return st >= TLS_ST_CW_CERT && st <= TLS_ST_CW_FINISHED;
}

static void before_write(void) {
    struct hs *h = hs_now;
    if (h && h->read && !h->charged && second_flight(hs_lib, h->ssl))
        charge_platform(hs_lib, (void *)h->ssl, h);
    pay(1);
}

int BIO_write(void *b, const void *data, int dlen) {
    struct lib *l = lib_of(CALLER);
    if (prof.loaded && depth == 0)
        before_write();
    return l->BIO_write(b, data, dlen);
}

int BIO_write_ex(void *b, const void *data, size_t dlen, size_t *written) {
    struct lib *l = lib_of(CALLER);
    if (prof.loaded && depth == 0)
        before_write();
    return l->BIO_write_ex(b, data, dlen, written);
}

int BIO_read(void *b, void *data, int dlen) {
    struct lib *l = lib_of(CALLER);
    if (prof.loaded && depth == 0)
        pay(1);
    int r = l->BIO_read(b, data, dlen);
    if (r > 0 && hs_now)
        hs_now->read = 1;
    return r;
}

int BIO_read_ex(void *b, void *data, size_t dlen, size_t *readbytes) {
    struct lib *l = lib_of(CALLER);
    if (prof.loaded && depth == 0)
        pay(1);
    int r = l->BIO_read_ex(b, data, dlen, readbytes);
    if (r > 0 && readbytes && *readbytes > 0 && hs_now)
        hs_now->read = 1;
    return r;
}

static void fill(struct lib *l, void *h) {
#define R(name) l->name = resolve(h, #name, (void *)&name)
#define H(name) l->name = resolve(h, #name, NULL)
    R(EVP_PKEY_sign); R(EVP_PKEY_verify); R(EVP_PKEY_derive); R(EVP_PKEY_keygen); R(EVP_PKEY_generate);
    R(EVP_PKEY_encrypt); R(EVP_PKEY_decrypt);
    R(EVP_DigestSign); R(EVP_DigestVerify); R(EVP_DigestSignUpdate); R(EVP_DigestVerifyUpdate);
    R(EVP_DigestSignFinal); R(EVP_DigestVerifyFinal); R(EVP_DigestUpdate); R(EVP_Digest);
    R(EVP_CipherUpdate); R(EVP_EncryptUpdate); R(EVP_DecryptUpdate); R(EVP_Cipher); R(EVP_KDF_derive);
    R(EVP_CipherInit_ex); R(EVP_EncryptInit_ex); R(EVP_DecryptInit_ex); R(EVP_CipherInit_ex2);
    R(EVP_EncryptInit_ex2); R(EVP_DecryptInit_ex2); R(EVP_CipherFinal_ex); R(EVP_EncryptFinal_ex);
    R(EVP_DecryptFinal_ex); R(EVP_CIPHER_CTX_ctrl); R(EVP_DigestInit_ex); R(EVP_DigestFinal_ex);
    R(X509_verify_cert); R(SSL_connect); R(SSL_do_handshake);
    R(SSL_read); R(SSL_read_ex); R(SSL_write); R(SSL_write_ex); R(SSL_free);
    R(BIO_write); R(BIO_write_ex); R(BIO_read); R(BIO_read_ex);
    H(EVP_PKEY_CTX_get0_pkey); H(EVP_PKEY_get_base_id); H(EVP_PKEY_get_bits); H(EVP_PKEY_get_group_name);
    H(EVP_PKEY_get0_type_name); H(EVP_MD_CTX_get_pkey_ctx); H(EVP_MD_CTX_get0_md); H(EVP_MD_get_type);
    H(OBJ_nid2sn); H(EVP_CIPHER_CTX_get0_cipher); H(EVP_CIPHER_get0_name); H(X509_STORE_CTX_get0_chain);
    H(OPENSSL_sk_num); H(OPENSSL_sk_value); H(X509_get0_pubkey); H(SSL_in_before);
    H(SSL_is_init_finished); H(SSL_is_server); H(SSL_session_reused); H(SSL_get_state);
    H(SSL_version); H(EVP_KDF_CTX_kdf); H(EVP_KDF_get0_name);
#undef R
#undef H
}

/* ---------------------------------------------------------------------------------------------
 * The general CPU factor on a program's computation between system calls (a phone's proxy). */

static int cpu_mode;
static __thread int64_t returned_ns;  /* when this thread's last system call returned */
static __thread int in_syscall;       /* our own sleeping or printing is not the program's */

static void *libc_next(const char *name) {
    return dlsym(RTLD_NEXT, name);
}

static void before_syscall(void) {
    if (!cpu_mode || in_syscall)
        return;
    in_syscall = 1;
    int64_t now = now_ns();
    if (returned_ns) {
        int64_t burst = now - returned_ns - padded_ns;
        if (burst > 0) {
            int64_t owed = (int64_t)((double)burst * (prof.cpu_factor - 1));
            owe(now, burst, burst + owed);
            count("cpu:between-syscalls", 0, burst, burst + owed);
            count_phase(burst + owed);
        }
    }
    pay(1);
    in_syscall = 0;
}

static void after_syscall(void) {
    if (cpu_mode && !in_syscall) {
        returned_ns = now_ns();
        padded_ns = 0;
    }
}

#define SYSCALL(ret, name, params, args)                                    \
    ret name params {                                                       \
        static ret(*real) params;                                           \
        if (!real)                                                          \
            real = (ret(*) params)libc_next(#name);                         \
        before_syscall();                                                   \
        ret result_ = real args;                                            \
        after_syscall();                                                    \
        return result_;                                                     \
    }

#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <signal.h>

SYSCALL(ssize_t, read, (int fd, void *buf, size_t n), (fd, buf, n))
SYSCALL(ssize_t, write, (int fd, const void *buf, size_t n), (fd, buf, n))
SYSCALL(ssize_t, send, (int fd, const void *buf, size_t n, int flags), (fd, buf, n, flags))
SYSCALL(ssize_t, sendto, (int fd, const void *buf, size_t n, int flags, const struct sockaddr *a, socklen_t l),
        (fd, buf, n, flags, a, l))
SYSCALL(ssize_t, sendmsg, (int fd, const struct msghdr *m, int flags), (fd, m, flags))
SYSCALL(ssize_t, splice, (int in, loff_t *oin, int out, loff_t *oout, size_t n, unsigned int flags),
        (in, oin, out, oout, n, flags))
SYSCALL(int, poll, (struct pollfd *f, nfds_t n, int t), (f, n, t))
SYSCALL(int, ppoll, (struct pollfd *f, nfds_t n, const struct timespec *t, const sigset_t *m), (f, n, t, m))
SYSCALL(int, epoll_wait, (int e, struct epoll_event *ev, int n, int t), (e, ev, n, t))
SYSCALL(int, epoll_pwait, (int e, struct epoll_event *ev, int n, int t, const sigset_t *m), (e, ev, n, t, m))
SYSCALL(int, select, (int n, fd_set *r, fd_set *w, fd_set *x, struct timeval *t), (n, r, w, x, t))
SYSCALL(int, accept, (int fd, struct sockaddr *a, socklen_t *l), (fd, a, l))
SYSCALL(int, accept4, (int fd, struct sockaddr *a, socklen_t *l, int flags), (fd, a, l, flags))
SYSCALL(int, connect, (int fd, const struct sockaddr *a, socklen_t l), (fd, a, l))

/* Receiving: also where plain data's per-byte cost is charged (not inside a TLS call, whose socket
 * reads are records: SSL_read charges their plaintext; not a peek, whose bytes are read again). */
#define RECEIVED(result, flags) \
    do { if ((result) > 0 && !in_ssl && !((flags) & MSG_PEEK)) charge_data(data_plain, (uint64_t)(result)); } while (0)

ssize_t recv(int fd, void *buf, size_t n, int flags) {
    static ssize_t (*real)(int, void *, size_t, int);
    if (!real)
        real = (ssize_t(*)(int, void *, size_t, int))libc_next("recv");
    before_syscall();
    ssize_t r = real(fd, buf, n, flags);
    after_syscall();
    RECEIVED(r, flags);
    return r;
}

ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *a, socklen_t *l) {
    static ssize_t (*real)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
    if (!real)
        real = (ssize_t(*)(int, void *, size_t, int, struct sockaddr *, socklen_t *))libc_next("recvfrom");
    before_syscall();
    ssize_t r = real(fd, buf, n, flags, a, l);
    after_syscall();
    RECEIVED(r, flags);
    return r;
}

ssize_t recvmsg(int fd, struct msghdr *m, int flags) {
    static ssize_t (*real)(int, struct msghdr *, int);
    if (!real)
        real = (ssize_t(*)(int, struct msghdr *, int))libc_next("recvmsg");
    before_syscall();
    ssize_t r = real(fd, m, flags);
    after_syscall();
    RECEIVED(r, flags);
    return r;
}

__attribute__((constructor)) static void init(void) {
    const char *path = getenv("WEARLAB_DEVICE_PROFILE");
    if (!path || !*path)
        return;
    const char *pad = getenv("WEARLAB_DEVICE_PAD");
    prof.spin = pad && !strcmp(pad, "spin");
    open_cores(getenv("WEARLAB_DEVICE_CORES"));
    calibrate_clock(cores != NULL, cores ? cores->tsc_hz : 0);
    in_syscall = 1;  /* loading the profile reads a file: that is not the program's computation */
    load_profile(path);
    in_syscall = 0;
    const char *cpu = getenv("WEARLAB_DEVICE_CPU_FACTOR");
    cpu_mode = prof.loaded && cpu && !strcmp(cpu, "1") && prof.cpu_factor > 1;
    const char *per_byte = getenv("WEARLAB_DEVICE_PER_BYTE");
    if (prof.loaded && per_byte && !strcmp(per_byte, "1")) {
        data_plain = find_op("data:plain");
        data_encrypted = find_op("data:encrypted");
        per_byte_mode = data_plain || data_encrypted;
    }
    open_stats(getenv("WEARLAB_DEVICE_STATS"));
    snprintf(stats->device, sizeof stats->device, "%s", prof.name);
}
