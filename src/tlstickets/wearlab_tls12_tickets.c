/*
 * wearlab's TLS 1.2 ticket hook: an LD_PRELOAD library that lets libcurl offer TLS 1.2 session
 * tickets (RFC 5077), as a browser's TLS 1.2 does (Chromium's BoringSSL sends the SessionTicket
 * extension in every ClientHello).
 *
 * Why: libcurl's OpenSSL backend sets SSL_OP_NO_TICKET on every SSL_CTX it makes, so its TLS 1.2
 * ClientHello carries no SessionTicket extension and it can resume 1.2 only by session ID - which
 * Go's crypto/tls server (Caddy, wearlab's page servers) never issues. Without this hook a page
 * load over TLS 1.2 never resumes; with it, a later connection to an origin resumes with the
 * ticket an earlier one received, in TLS 1.2's abbreviated handshake (RFC 5246 7.3: no key
 * exchange, no certificate). libcurl has no option for it (CURLSSLOPT_* has none), and the pycurl
 * wheel bundles its own libcurl and OpenSSL, so the option is cleared where libcurl sets it.
 *
 * What it does: it interposes SSL_CTX_set_options and, while switched on, clears SSL_OP_NO_TICKET
 * (1 << 14, OpenSSL's stable value) from what the caller sets; everything else passes unchanged.
 * The real function is resolved from the library that called it (dladdr of the return address,
 * then dlsym on that library's own dependency tree: for libcurl, the wheel's bundled libssl), as
 * wearlab's devicecpu library does, never from whatever comes next in the global scope (a process
 * may hold two OpenSSLs: the system's and the wheel's). No OpenSSL headers: the context is opaque.
 *
 * Switched off at load; a process switches it with wearlab_tls12_tickets(1|0) (the page agent
 * through ctypes, per load) and reads how many times it cleared the option with
 * wearlab_tls12_tickets_cleared() - a load that asked for tickets and cleared nothing did not get
 * them, and says so.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>

#define SSL_OP_NO_TICKET ((uint64_t)1 << 14)

typedef uint64_t (*set_options_fn)(void *, uint64_t);

static volatile int on;
static uint64_t cleared;

int wearlab_tls12_tickets(int enable) {
    int was = on;
    on = enable != 0;
    return was;
}

uint64_t wearlab_tls12_tickets_cleared(void) {
    return __atomic_load_n(&cleared, __ATOMIC_RELAXED);
}

uint64_t SSL_CTX_set_options(void *ctx, uint64_t op);

/* The caller's SSL_CTX_set_options: looked up in the caller's own dependency tree. */
static set_options_fn real_for(const void *caller) {
    Dl_info info;
    set_options_fn f = NULL;
    if (dladdr(caller, &info) && info.dli_fname && *info.dli_fname) {
        void *h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
        if (h) {
            f = (set_options_fn)dlsym(h, "SSL_CTX_set_options");
            dlclose(h);
        }
    }
    if (f == NULL || f == SSL_CTX_set_options)   /* the main program's scope starts with us */
        f = (set_options_fn)dlsym(RTLD_NEXT, "SSL_CTX_set_options");
    return f == SSL_CTX_set_options ? NULL : f;
}

uint64_t SSL_CTX_set_options(void *ctx, uint64_t op) {
    set_options_fn real = real_for(__builtin_return_address(0));
    if (real == NULL) {
        fprintf(stderr, "wearlab-tls12-tickets: no SSL_CTX_set_options to call\n");
        return 0;
    }
    if (on && (op & SSL_OP_NO_TICKET)) {
        op &= ~SSL_OP_NO_TICKET;
        __atomic_add_fetch(&cleared, 1, __ATOMIC_RELAXED);
    }
    return real(ctx, op);
}
