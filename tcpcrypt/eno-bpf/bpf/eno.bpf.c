// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * TCP-ENO (RFC 8547) on the wire, as a cgroup sock_ops program.
 *
 * Attached to the cgroup of wearlab's tcpcrypt daemon; only sockets created
 * by processes in that cgroup (and children accepted from its listeners) run
 * this program.  IPv4 only; 127/8 is skipped.
 *
 *   active opener  SYN      SYN-form ENO: config TEPs (or per-socket override)
 *                  ACK...   non-SYN-form ENO (69,2) until a non-SYN segment
 *                           is received (RFC 8547 4.6), then callbacks off
 *   passive opener SYN-ACK  SYN-form ENO: global suboption b=1 + one TEP, or
 *                           vacuous (b=1 only); nothing if the SYN had no ENO
 *
 * Everything the daemon needs (both SYN-form options exactly as on the wire,
 * role, whether the first received ACK carried ENO, fallback reason) is kept
 * in socket storage ("eno_sk_rec", BPF_MAP_TYPE_SK_STORAGE) of the
 * connection's own socket: it lives and dies with the socket, and no other
 * connection -- no SYN flood -- can evict it.  The daemon reads it through
 * the socket's fd.  Layouts below must match src/lib.rs.
 *
 * Half-open connections hold no state of ours: a request sock has no socket
 * storage, so the passive side decides its SYN-ACK option statelessly from
 * the SYN (TCP_BPF_SYN: the SYN itself, or on a retransmitted SYN-ACK the SYN
 * the kernel saved -- the listener gets TCP_SAVE_SYN), and writes its record
 * only at PASSIVE_ESTABLISHED, from the SYN saved with the new socket (the
 * same deterministic computation, so the same option) and the ACK in hand.
 * A SYN the kernel did not save (a SYN cookie) gives FB_SYN_NOT_SAVED; the
 * daemon then resets the connection if the ACK carried ENO (fail closed).
 */
#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define AF_INET 2
#define SOL_TCP 6
#ifndef TCP_BPF_SYN
#define TCP_BPF_SYN 1005
#endif
#define TCPHDR_SYN 0x02
#define TCPHDR_ACK 0x10

#define TCPOPT_EOL 0
#define TCPOPT_NOP 1
#define TCPOPT_ENO 69
#define ENO_MAX 40          /* an option can't be longer than the option space */
#define BUF 64              /* buffers are 64 bytes so that "& 63" bounds indices */
#define GLOBAL_B 0x01

#define CG_OK 1

/* eno_rec.role */
#define ROLE_ACTIVE  1
#define ROLE_PASSIVE 2

/* eno_rec.state */
#define ST_A_SYN_SENT    1  /* active: SYN with ENO sent, waiting for SYN-ACK */
#define ST_A_ACK_ENO     2  /* active: ENO ok, sending 69,2 until a non-SYN segment arrives */
#define ST_B_SYNACK_SENT 3  /* passive: SYN-ACK with ENO sent, waiting for the ACK */
#define ST_DONE          4  /* handshake over (look at fallback) */

/* eno_rec.flags */
#define F_ACK_HAD_ENO    0x01  /* first ACK segment received carried ENO */
#define F_SYN_ENO        0x02  /* syn_opt valid */
#define F_SYNACK_ENO     0x04  /* synack_opt valid */
#define F_OVERRIDE       0x08  /* active: SYN option came from the per-socket override */
#define F_RESUME         0x10  /* passive: the SYN-ACK agreed to resume (RFC 8548 3.5) */

/* eno_rec.fallback: 0 = none (yet) */
#define FB_NONE            0
#define FB_SYN_NO_ENO      1  /* passive: SYN without ENO option */
#define FB_SYNACK_NO_ENO   2  /* active: SYN-ACK without ENO option */
#define FB_ACK_NO_ENO      3  /* passive: first ACK without ENO option */
#define FB_ILL_FORMED      4  /* peer's SYN-form option ill-formed (4.4) */
#define FB_DUPLICATE       5  /* more than one ENO option in a SYN segment (4.1) */
#define FB_ROLE_CONFLICT   6  /* both ends sent the same b bit (4.3) */
#define FB_NO_COMMON_TEP   7  /* no valid TEP / vacuous option (4.6 rule 2) */
#define FB_NO_SPACE        8  /* not enough TCP option space for our option */
#define FB_NO_CONFIG       9  /* no TEP configured and no override */
#define FB_SYN_NOT_SAVED  10  /* passive: the SYN was not saved (SYN cookie, old listener) */

#ifndef TCP_SAVE_SYN
#define TCP_SAVE_SYN 27
#endif
#ifndef ENOENT
#define ENOENT 2
#endif

struct eno_rec {
	__u8 role;
	__u8 state;
	__u8 flags;
	__u8 fallback;
	__u8 syn_len;       /* length of syn_opt (== syn_opt[1]), 0 if none */
	__u8 synack_len;    /* length of synack_opt, 0 if none */
	__u8 tep;           /* negotiated TEP id (glt, 7 bits), 0 if none */
	__u8 pad;
	__u8 syn_opt[ENO_MAX];     /* ENO option of the SYN (host A), kind+len included */
	__u8 synack_opt[ENO_MAX];  /* ENO option of the SYN-ACK (host B) */
};

struct eno_cfg {
	__u8 n_teps;        /* number of valid entries in teps */
	__u8 flags;         /* reserved, 0 */
	__u8 teps[32];      /* supported TEP ids, most preferred first */
};

struct eno_sk_syn {
	__u8 len;                  /* 0: use config; else length of opt (2..40) */
	__u8 opt[ENO_MAX];         /* full SYN-form ENO option incl. kind and len */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct eno_cfg);
} eno_cfg SEC(".maps");

/* one record per connection, in the connection's socket */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct eno_rec);
} eno_sk_rec SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct eno_sk_syn);
} eno_sk_syn SEC(".maps");

struct obuf {
	__u8 b[BUF];
};

/*
 * RFC 8548 3.5 resumption, passive side: the identifier halves of the session
 * secrets the daemon would accept - the next 8 of each chain it holds, so the
 * SYNs of connections opened at once, each naming its own ss[i], all resume -
 * written by the daemon once it holds the chain (after the peer's first
 * authenticated frame) and deleted when a secret is used, erased or expires.  Key: TEP id + the half the peer sends; value:
 * the half we answer with.  Looked up (never changed) for a SYN-ACK, so a
 * retransmitted SYN-ACK carries the same option; deleted at
 * PASSIVE_ESTABLISHED (single use: a second SYN naming the same ticket after
 * that gets a fresh key exchange).  Our nonce_b is zero bytes (allowed,
 * 3.5): a random one could not be recomputed from the saved SYN; nonce_a
 * (8 bytes from the daemon) keeps sn[i] unique.
 */
#define RESUME_HALF 9
struct resume_key {
	__u8 tep;
	__u8 half[RESUME_HALF];
};
struct resume_val {
	__u8 half[RESUME_HALF];
};
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct resume_key);
	__type(value, struct resume_val);
} eno_resume SEC(".maps");

/* eno_find() leaves in out->b[OTHER_AT] whether the segment carried an option
 * that also takes SYN-ACK space (MPTCP 30, MD5 19, TCP-AO 29, Fast Open 34) */
#define OTHER_AT 63

struct parsed {
	__u64 teps[2];      /* bitmap over glt (0..127) */
	__u8 global;        /* first global suboption, implicit 0x00 */
	__u8 n_teps;
	__u8 last_tep;      /* last TEP glt in option order */
	__u8 dat_pos;       /* position of the last suboption with implied-length data (v=1, no length byte) */
	__u8 dat_id;        /* its TEP glt, 0 if none */
};

/*
 * The inline asm below is BPF assembly; for any other target (the host build
 * of these parsers for fuzz_eno_diff, tcpcrypt/fuzz) each helper is the C
 * expression with the same 64-bit semantics (BPF ">>=" is a logical shift).
 */
/* (glt >> 6) & 1, computed where clang can't fold it into an index the
 * verifier can't bound */
static __always_inline __u64 word_of(__u8 glt)
{
	__u64 w = glt;

#ifdef __bpf__
	asm volatile("%0 >>= 6; %0 &= 1" : "+r"(w));
#else
	w = (w >> 6) & 1;
#endif
	return w;
}

static __always_inline int has_tep(const __u64 *bm, __u8 glt)
{
	return (bm[word_of(glt)] >> (glt & 63)) & 1;
}

/*
 * The walkers below are branch-free: every loop iteration looks at a fixed
 * byte position and folds it into the state with masks instead of if/else.
 * That gives the verifier a single path per iteration.  (A data-dependent
 * cursor made the verifier's state count explode, and bpf_loop() callbacks
 * are refused where there is no BPF JIT -- UML, wearlab's guest kernel.)
 * The comparisons are inline asm so that clang cannot turn the mask
 * arithmetic back into branches.
 */
/* x & 63, hidden from clang so that it can't drop the mask the verifier needs */
static __always_inline __u64 m63(__u64 x)
{
#ifdef __bpf__
	asm volatile("%0 &= 63" : "+r"(x));
#else
	x &= 63;
#endif
	return x;
}

/* in asm, because clang recognizes these idioms and emits branches */
static __always_inline __u64 lt_(__u64 a, __u64 b)   /* a < b, both < 2^63 */
{
#ifdef __bpf__
	asm volatile("%0 -= %1; %0 >>= 63" : "+r"(a) : "r"(b));
#else
	a = (a - b) >> 63;
#endif
	return a;
}

static __always_inline __u64 nz_(__u64 x)             /* x != 0 */
{
	__u64 y = x;

#ifdef __bpf__
	asm volatile("%0 = -%0; %0 |= %1; %0 >>= 63" : "+r"(y) : "r"(x));
#else
	y = ((0 - y) | x) >> 63;
#endif
	return y;
}

#define LT(a, b)  lt_((__u64)(a), (__u64)(b))
#define NZ(x)     nz_((__u64)(x))
#define EQ(a, b)  (1 ^ NZ(((__u64)(a)) ^ ((__u64)(b))))
#define SEL(m, a, b) ((((__u64)(a)) & -(__u64)(m)) | (((__u64)(b)) & ~-(__u64)(m)))

/*
 * RFC 8548 3.5's rules on a TEP's suboptions, as tcpcrypt-proto has them
 * (resume::lengths_valid): a suboption with data (v = 1) carries at most
 * 9 + 8 bytes (identifier half, nonce); from 9 bytes on it offers
 * resumption, which A may do once per TEP.  A "rules word" describes A's
 * option for the TEP ids 0x20-0x3f (tcpcrypt's are 0x21-0x24, RFC 8548 7;
 * tcpcryptd refuses any other TEP): bit (id - 0x20) set when A's suboptions
 * for that TEP break the rules (RULE_BAD), bit 32 + (id - 0x20) when A offers
 * to resume it (RULE_RES).  One scalar, not two bitmaps in struct parsed: the
 * call chains through active_established and passive_synack are at the
 * verifier's combined stack bound.
 */
#define RULE_BAD(id) (1ULL << ((id) & 31))
#define RULE_RES(id) (1ULL << (32 + ((id) & 31)))

/* whether the rules word r says TEP t cannot be chosen */
static __always_inline int rule_bad(__u64 r, __u8 t)
{
	return t >= 0x20 && t < 0x40 && ((r >> (t & 31)) & 1);
}

/*
 * Parse a SYN-form ENO option (o[0] = 69, o[1] = len) per RFC 8547 4.1-4.4.
 * Fills p (offered TEPs, first global suboption).  If a is given, returns
 * the last TEP suboption (in option order) that A also offered and that is a
 * valid choice under the rules word ar of A's option (4.5: host B's option
 * decides; RFC 8548 3.5: the TEP not bad in A, at most 17 bytes of data, and
 * a resuming one only if A offered to resume), else 0.  Whether the ticket a
 * resumption names exists only the daemon knows: a SYN-ACK naming one it
 * does not hold is reset by the daemon, never relayed in plaintext.
 * Returns -1 if the option is ill-formed.
 */
static __always_inline int walk_syn_form(const struct obuf *ob, __u32 len,
					 struct parsed *p, const struct parsed *a, __u64 ar)
{
	__u64 skip = 0, hg = 0, glob = 0, bm0 = 0, bm1 = 0, err = 0, last = 0;
	__u64 pick = 0, n = 0, a0 = 0, a1 = 0, dpos = 0, did = 0;

	if (a) {
		a0 = a->teps[0];
		a1 = a->teps[1];
	}
	for (__u32 pos = 2; pos < ENO_MAX; pos++) {
		__u64 c = ob->b[pos], t = ob->b[pos + 1];
		__u64 act = LT(pos, len) & EQ(skip, 0);
		__u64 isg = LT(c, 0x20);
		__u64 isdat = 1 ^ LT(c, 0xa0);
		__u64 islen = LT(c, 0xa0) & (1 ^ LT(c, 0x80));
		__u64 istep = LT(c, 0x80) & (1 ^ isg);
		__u64 gm = act & isg & (1 ^ hg);
		__u64 id = SEL(islen, t & 0x7f, c & 0x7f);
		__u64 tm = act & (istep | islen | isdat);
		__u64 hi = (id >> 6) & 1;
		__u64 bit = 1ULL << (id & 63);
		__u64 dl = (c & 0x1f) + 1;
		__u64 bad = (1 ^ LT(pos + 1, len)) | LT(t, 0xa0) | LT(len, pos + 2 + dl);
		__u64 has = (SEL(hi, a1, a0) >> (id & 63)) & 1;
		__u64 ok = has;

		if (a) {
			/* RFC 8548 3.5 on B's suboption (TEP ids 0x20-0x3f); a
			 * constant condition: eno_parse's walk has none of it */
			__u64 low = (id >> 5) & 1 & (1 ^ hi);
			__u64 dlen = SEL(act & isdat, len - pos - 1, SEL(islen, dl, 0));
			__u64 withdata = (isdat | islen) & low;
			__u64 toolong = withdata & LT(17, dlen);
			__u64 isres = withdata & (1 ^ LT(dlen, 9)) & (1 ^ toolong);
			__u64 abad = (ar >> (id & 31)) & low & 1;
			__u64 ares = (ar >> (32 + (id & 31))) & low & 1;

			ok = has & (1 ^ abad) & (1 ^ toolong) & ((1 ^ isres) | ares);
		}

		glob |= SEL(gm, c, 0);
		hg |= gm;
		bm0 |= SEL(tm & (1 ^ hi), bit, 0);
		bm1 |= SEL(tm & hi, bit, 0);
		n += tm;
		last = SEL(tm, id, last);
		pick = SEL(tm & ok, id, pick);
		dpos = SEL(act & isdat, pos, dpos);
		did = SEL(act & isdat, id, did);
		err |= act & islen & bad;
		skip = SEL(act, SEL(islen, 1 + dl, 0) + SEL(isdat, 64, 0), skip - NZ(skip));
	}
	p->teps[0] = bm0;
	p->teps[1] = bm1;
	p->global = glob;
	p->n_teps = n;
	p->last_tep = last;
	p->dat_pos = dpos;
	p->dat_id = did;
	if (err)
		return -1;
	return pick;
}

/*
 * The rules word (above) of a SYN-form option that eno_parse() accepted: a
 * walk of its own, so that eno_parse's and eno_pick's frames stay as small.
 */
__attribute__((noinline))
__u64 eno_rules(const struct obuf *ob, __u32 len)
{
	__u64 skip = 0, r = 0;

	if (!ob || len > ENO_MAX)
		return 0;
	for (__u32 pos = 2; pos < ENO_MAX; pos++) {
		__u64 c = ob->b[pos], t = ob->b[pos + 1];
		__u64 act = LT(pos, len) & EQ(skip, 0);
		__u64 isdat = 1 ^ LT(c, 0xa0);
		__u64 islen = LT(c, 0xa0) & (1 ^ LT(c, 0x80));
		__u64 id = SEL(islen, t & 0x7f, c & 0x7f);
		__u64 dl = (c & 0x1f) + 1;
		__u64 low = (id >> 5) & 1 & (1 ^ ((id >> 6) & 1));   /* 0x20..0x3f */
		__u64 dlen = SEL(act & isdat, len - pos - 1, SEL(islen, dl, 0));
		__u64 withdata = act & (isdat | islen) & low;
		__u64 toolong = withdata & LT(17, dlen);
		__u64 isres = withdata & (1 ^ LT(dlen, 9)) & (1 ^ toolong);
		__u64 again = isres & ((r >> (32 + (id & 31))) & 1);

		r |= SEL(toolong | again, 1ULL << (id & 31), 0);
		r |= SEL(isres, 1ULL << (32 + (id & 31)), 0);
		skip = SEL(act, SEL(islen, 1 + dl, 0) + SEL(isdat, 64, 0), skip - NZ(skip));
	}
	return r;
}

/* Parse a SYN-form option; 0 if well formed, -1 otherwise. */
__attribute__((noinline))
int eno_parse(const struct obuf *ob, __u32 len, struct parsed *p)
{
	if (!ob || !p)
		return -1;
	if (len < 2 || len > ENO_MAX)
		return -1;
	return walk_syn_form(ob, len, p, NULL, 0) < 0 ? -1 : 0;
}

/*
 * Negotiated TEP (4.5): the last TEP suboption in host B's SYN-form option
 * (hb, lb) that host A also sent (bitmap in a) and that is a valid choice
 * under ar, the rules word of A's option (eno_rules).  Returns the glt, 0 if
 * none.
 */
__attribute__((noinline))
int eno_pick(const struct obuf *hb, __u32 lb, const struct parsed *a, __u64 ar)
{
	struct parsed tmp;
	int r;

	if (!hb || !a)
		return 0;
	if (lb < 2 || lb > ENO_MAX)
		return 0;
	r = walk_syn_form(hb, lb, &tmp, a, ar);
	return r < 0 ? 0 : r;
}

/*
 * Find the ENO option(s) in TCP options ob[start .. start+olen), start <= 20.
 * Copies the first one into out.  Returns its length, 0 if none,
 * -1 if there is more than one, -2 if the options are malformed.
 */
__attribute__((noinline))
int eno_find(const struct obuf *ob, __u32 start, __u32 olen, struct obuf *out)
{
	__u64 skip = 0, count = 0, first = 0, err = 0, stop = 0, other = 0, flen;

	if (!ob || !out || start > 20)
		return -2;
	if (olen > ENO_MAX)
		olen = ENO_MAX;
	for (__u32 pos = 0; pos < ENO_MAX; pos++) {
		__u64 k = ob->b[m63(start + pos)];
		__u64 l = ob->b[m63(start + pos + 1)];
		__u64 act = LT(pos, olen) & (1 ^ stop) & EQ(skip, 0);
		__u64 iseol = EQ(k, 0), isnop = EQ(k, 1);
		__u64 isopt = 1 ^ (iseol | isnop);
		__u64 bad = LT(l, 2) | LT(olen, pos + l) | (1 ^ LT(pos + 1, olen));
		__u64 iseno = act & isopt & EQ(k, TCPOPT_ENO);

		stop |= act & iseol;
		err |= act & isopt & bad;
		first = SEL(iseno & EQ(count, 0), start + pos, first);
		count += iseno;
		other |= act & isopt & (EQ(k, 30) | EQ(k, 19) | EQ(k, 29) | EQ(k, 34));
		skip = SEL(act, SEL(isopt & (1 ^ bad), l - 1, 0), skip - NZ(skip));
		stop |= act & isopt & bad;
	}
	out->b[OTHER_AT] = other;
	if (err)
		return -2;
	if (count == 0)
		return 0;
	if (count > 1)
		return -1;
	flen = ob->b[m63(first + 1)];
	if (flen > ENO_MAX)
		return -2;
	for (__u32 k = 0; k < ENO_MAX; k++)
		out->b[k] = ob->b[m63(first + k)];
	return flen;
}

/* The record in the socket's storage (full sockets only; NULL for a request
 * sock or without one). */
static __always_inline struct eno_rec *sk_rec(struct bpf_sock_ops *skops)
{
	struct bpf_sock *sk = skops->sk;

	if (!sk)
		return NULL;
	return bpf_sk_storage_get(&eno_sk_rec, sk, NULL, 0);
}

/* Create (or overwrite) the socket's record with *rec. */
static __always_inline void sk_rec_put(struct bpf_sock_ops *skops, const struct eno_rec *rec)
{
	struct bpf_sock *sk = skops->sk;
	struct eno_rec *p;

	if (!sk)
		return;
	p = bpf_sk_storage_get(&eno_sk_rec, sk, (void *)rec, BPF_SK_STORAGE_GET_F_CREATE);
	if (p)
		__builtin_memcpy(p, rec, sizeof(*rec));
}

static __always_inline int skip(struct bpf_sock_ops *skops)
{
	if (skops->family != AF_INET)
		return 1;
	if ((bpf_ntohl(skops->local_ip4) >> 24) == 127 ||
	    (bpf_ntohl(skops->remote_ip4) >> 24) == 127)
		return 1;
	return 0;
}

/* Copies the whole 40-byte buffer (a constant-size copy keeps clang from
 * emitting a variable-length memcpy); readers only look at [0, len). */
static __always_inline void copy_opt(__u8 *dst, const __u8 *src, __u32 len)
{
	(void)len;
	__builtin_memcpy(dst, src, ENO_MAX);
}

static __always_inline int build_syn_cfg(const struct eno_cfg *cfg, struct eno_rec *rec);

/* Active opener: build the SYN option into rec (syn_opt/syn_len). */
static __always_inline int build_syn(struct bpf_sock_ops *skops, struct eno_rec *rec)
{
	struct eno_sk_syn *ov = NULL;
	struct bpf_sock *sk = skops->sk;
	__u32 zero = 0;

	if (sk)
		ov = bpf_sk_storage_get(&eno_sk_syn, sk, NULL, 0);
	if (ov && ov->len >= 2 && ov->len <= ENO_MAX) {
		__u32 l = ov->len;

		copy_opt(rec->syn_opt, ov->opt, l);
		rec->syn_opt[0] = TCPOPT_ENO;
		rec->syn_opt[1] = l;
		rec->syn_len = l;
		rec->flags |= F_OVERRIDE;
		return 0;
	}

	struct eno_cfg *cfg = bpf_map_lookup_elem(&eno_cfg, &zero);
	if (!cfg)
		return -1;
	return build_syn_cfg(cfg, rec);
}

/* The SYN option of the configured TEPs (fresh key exchange). */
static __always_inline int build_syn_cfg(const struct eno_cfg *cfg, struct eno_rec *rec)
{
	if (cfg->n_teps == 0)
		return -1;
	__u32 n = cfg->n_teps;
	if (n > ENO_MAX - 2)
		n = ENO_MAX - 2;
	rec->syn_opt[0] = TCPOPT_ENO;
	for (int k = 0; k < 32; k++) {
		if (k >= n)
			break;
		rec->syn_opt[2 + k] = cfg->teps[k] & 0x7f;   /* v = 0: no data */
	}
	rec->syn_opt[1] = 2 + n;
	rec->syn_len = 2 + n;
	return 0;
}

static __always_inline int reserve(struct bpf_sock_ops *skops, __u32 len)
{
	return bpf_reserve_hdr_opt(skops, len, 0) ? -1 : 0;
}

static __always_inline void store_opt(struct bpf_sock_ops *skops, const __u8 *opt, __u32 len)
{
	__u8 buf[ENO_MAX];

	len &= 0x3f;
	if (len < 2 || len > ENO_MAX)
		return;
	copy_opt(buf, opt, len);
	bpf_store_hdr_opt(skops, buf, len, 0);
}

/* ---- active opener ---------------------------------------------------- */

static __attribute__((noinline)) void active_connect(struct bpf_sock_ops *skops)
{
	struct eno_rec rec = {};

	rec.role = ROLE_ACTIVE;
	rec.state = ST_A_SYN_SENT;
	if (build_syn(skops, &rec)) {
		rec.state = ST_DONE;
		rec.fallback = FB_NO_CONFIG;
		rec.syn_len = 0;
		sk_rec_put(skops, &rec);
		return;
	}
	rec.flags |= F_SYN_ENO;
	sk_rec_put(skops, &rec);
	/* no record, no ENO: the SYN goes out plain (hdr_opt finds nothing) */
	bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags |
				  BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG);
}

static __attribute__((noinline)) void active_established(struct bpf_sock_ops *skops)
{
	struct eno_rec *rec;
	struct obuf opts = {}, eno = {};
	struct obuf *mine = &opts;   /* reused once the SYN-ACK options are parsed */
	struct parsed p;   /* the SYN-ACK's option, then ours (one: the stack bound) */
	int olen = 0, n;

	rec = sk_rec(skops);
	if (!rec || rec->role != ROLE_ACTIVE || rec->state != ST_A_SYN_SENT) {
		bpf_sock_ops_cb_flags_set(skops, 0);
		return;
	}

	/* copy the SYN-ACK's TCP options out of the packet */
	__u8 *data = (__u8 *)(long)skops->skb_data;
	__u8 *end = (__u8 *)(long)skops->skb_data_end;
	if (data + 20 <= end) {
		olen = ((data[12] >> 4) & 0xf) * 4 - 20;
		if (olen < 0)
			olen = 0;
		if (olen > ENO_MAX)
			olen = ENO_MAX;
		for (int k = 0; k < ENO_MAX; k++) {
			if (k >= olen)
				break;
			__u8 *p = data + 20 + k;
			if (p + 1 > end) {
				olen = k;
				break;
			}
			opts.b[k] = *p;
		}
	}

	n = eno_find(&opts, 0, olen, &eno);
	rec->flags &= ~F_ACK_HAD_ENO;
	if (n != 0)
		rec->flags |= F_ACK_HAD_ENO;   /* the SYN-ACK is A's first received ACK */
	if (n > 0 && n <= ENO_MAX) {
		copy_opt(rec->synack_opt, eno.b, n);
		rec->synack_len = n;
		rec->flags |= F_SYNACK_ENO;
	}
	copy_opt(mine->b, rec->syn_opt, ENO_MAX);

	if (n == 0)
		rec->fallback = FB_SYNACK_NO_ENO;
	else if (n == -1)
		rec->fallback = FB_DUPLICATE;
	else if (n < 0 || eno_parse(&eno, n, &p))
		rec->fallback = FB_ILL_FORMED;
	else {
		__u8 peer_b = p.global & GLOBAL_B;

		if (eno_parse(mine, rec->syn_len, &p))
			rec->fallback = FB_ILL_FORMED;
		else if ((p.global & GLOBAL_B) == peer_b)
			rec->fallback = FB_ROLE_CONFLICT;
		else {
			/* host B is whoever sent b=1: normally the passive
			 * opener, or us if the per-socket override set b=1 */
			int tep;

			if (!peer_b) {
				eno_parse(&eno, n, &p);
				tep = eno_pick(mine, rec->syn_len, &p, eno_rules(&eno, n));
			} else {
				tep = eno_pick(&eno, n, &p, eno_rules(mine, rec->syn_len));
			}
			if (!tep)
				rec->fallback = FB_NO_COMMON_TEP;
			rec->tep = tep;
		}
	}

	if (rec->fallback) {
		rec->state = ST_DONE;
		bpf_sock_ops_cb_flags_set(skops, 0);
		return;
	}
	rec->state = ST_A_ACK_ENO;
	bpf_sock_ops_cb_flags_set(skops, BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG |
				  BPF_SOCK_OPS_PARSE_ALL_HDR_OPT_CB_FLAG);
}

/* ---- passive opener --------------------------------------------------- */

/*
 * The passive opener's TEP: the first configured one that A offered and
 * whose suboptions in A's option meet RFC 8548 3.5 (rules: eno_rules), 0 if
 * none.  A function of its own so that passive_synack's frame stays small
 * (see there).
 */
static __attribute__((noinline)) __u8 choose_tep(const struct parsed *a, __u64 rules)
{
	__u32 zero = 0;
	struct eno_cfg *cfg = bpf_map_lookup_elem(&eno_cfg, &zero);

	if (!cfg || !a)
		return 0;
	__u32 nc = cfg->n_teps;
	for (int k = 0; k < 32; k++) {
		if (k >= nc)
			break;
		__u8 t = cfg->teps[k] & 0x7f;
		/* a TEP A's suboptions make invalid is not offered: the next
		 * we support, or none */
		if (t >= 0x20 && has_tep(a->teps, t) && !rule_bad(rules, t))
			return t;
	}
	return 0;
}

/*
 * The passive opener's decision, from the SYN: for the SYN-ACK (skops->sk is
 * the request sock; TCP_BPF_SYN is the SYN being answered, or the saved SYN
 * on a retransmission) and again at PASSIVE_ESTABLISHED (the SYN saved with
 * the new socket).  Deterministic in the SYN and the config, so every call
 * gives the same option (4.6: a retransmitted SYN-ACK MUST NOT change it).
 */
static __attribute__((noinline)) void passive_synack(struct bpf_sock_ops *skops, struct eno_rec *rec, int take)
{
	struct obuf hdr = {}, eno = {};
	struct parsed a;
	int hl, n;

	if (!rec)
		return;
	hl = bpf_getsockopt(skops, SOL_TCP, TCP_BPF_SYN, hdr.b, 60);
	if (hl == -ENOENT) {
		rec->fallback = FB_SYN_NOT_SAVED;
		rec->state = ST_DONE;
		return;
	}
	if (hl < 20) {
		rec->fallback = FB_SYN_NO_ENO;
		rec->state = ST_DONE;
		return;
	}
	n = eno_find(&hdr, 20, hl - 20, &eno);
	if (n == 0) {
		rec->fallback = FB_SYN_NO_ENO;
		rec->state = ST_DONE;
		return;
	}
	if (n == -1) {
		rec->fallback = FB_DUPLICATE;
		rec->state = ST_DONE;
		return;
	}
	if (n < 0 || n > ENO_MAX) {
		rec->fallback = FB_ILL_FORMED;
		rec->state = ST_DONE;
		return;
	}
	copy_opt(rec->syn_opt, eno.b, n);
	rec->syn_len = n;
	rec->flags |= F_SYN_ENO;
	if (eno_parse(&eno, n, &a)) {
		rec->fallback = FB_ILL_FORMED;    /* ignore the option: send none */
		rec->state = ST_DONE;
		return;
	}
	if (a.global & GLOBAL_B) {
		rec->fallback = FB_ROLE_CONFLICT; /* 4.6 rule 3: send no ENO */
		rec->state = ST_DONE;
		return;
	}

	__u8 tep = choose_tep(&a, eno_rules(&eno, n));

	rec->synack_opt[0] = TCPOPT_ENO;
	rec->synack_opt[2] = GLOBAL_B;
	/* A offers to resume with this TEP (its last suboption, nonce_a 0..8
	 * bytes) a ticket we hold, and nothing else in the SYN takes SYN-ACK
	 * option space beyond MSS/SACK/TS/WS (<= 20 bytes, so our 13 fit) */
	__u32 dl = n - a.dat_pos - 1;
	if (tep && a.dat_id == tep && dl >= RESUME_HALF && dl <= RESUME_HALF + 8 &&
	    !eno.b[OTHER_AT]) {
		/* the key in hdr's bytes, done with once eno_find copied the
		 * option: this frame must stay <= 160 bytes, or the chain
		 * PASSIVE_ESTABLISHED -> passive_synack -> eno_parse passes the
		 * verifier's 512-byte bound where frames round up to 32 bytes
		 * (no JIT: the UML guest) */
		struct resume_key *key = (struct resume_key *)hdr.b;
		struct resume_val *v;

		key->tep = tep;
		for (int k = 0; k < RESUME_HALF; k++)
			key->half[k] = eno.b[m63(a.dat_pos + 1 + k)];
		v = bpf_map_lookup_elem(&eno_resume, key);
		if (v) {
			rec->synack_opt[1] = 4 + RESUME_HALF;
			rec->synack_opt[3] = tep | 0x80;
			for (int k = 0; k < RESUME_HALF; k++)
				rec->synack_opt[4 + k] = v->half[k];
			rec->synack_len = 4 + RESUME_HALF;
			rec->tep = tep;
			rec->flags |= F_SYNACK_ENO | F_RESUME;
			rec->state = ST_B_SYNACK_SENT;
			if (take)
				bpf_map_delete_elem(&eno_resume, key);
			return;
		}
	}
	if (tep) {
		rec->synack_opt[1] = 4;
		rec->synack_opt[3] = tep;
		rec->synack_len = 4;
		rec->tep = tep;
	} else {
		rec->synack_opt[1] = 3;           /* vacuous: b=1 only */
		rec->synack_len = 3;
		rec->fallback = FB_NO_COMMON_TEP;
	}
	rec->flags |= F_SYNACK_ENO;
	rec->state = ST_B_SYNACK_SENT;
}

/*
 * B's first non-SYN segment (A's third segment) made the connection: decide
 * again from the saved SYN, look at the ACK, and write the record into the
 * new socket's storage.
 */
static __attribute__((noinline)) void passive_established(struct bpf_sock_ops *skops)
{
	struct eno_rec nrec = {};
	__u8 buf[ENO_MAX] = { TCPOPT_ENO, 0 };
	long r;

	bpf_sock_ops_cb_flags_set(skops, 0);   /* B received a non-SYN segment: done */
	nrec.role = ROLE_PASSIVE;
	passive_synack(skops, &nrec, 1);
	r = bpf_load_hdr_opt(skops, buf, sizeof(buf), 0);
	if (r > 0 || r == -28 /* -ENOSPC: present but long */)
		nrec.flags |= F_ACK_HAD_ENO;
	else
		nrec.flags &= ~F_ACK_HAD_ENO;
	if (nrec.state == ST_B_SYNACK_SENT) {
		if (!(nrec.flags & F_ACK_HAD_ENO) && !nrec.fallback)
			nrec.fallback = FB_ACK_NO_ENO;
		nrec.state = ST_DONE;
	}
	sk_rec_put(skops, &nrec);
}

/*
 * HDR_OPT_LEN_CB of a SYN-ACK: decide and reserve; nothing is stored (a
 * request sock has no socket storage, and half-open connections must not
 * cost state a flood could fill).  Called straight from the entry point to
 * keep the call chain's combined stack under 512 bytes (6.12 counts it more
 * strictly than 6.18).
 */
static __attribute__((noinline)) int synack_len(struct bpf_sock_ops *skops)
{
	struct eno_rec nrec = {};

	nrec.role = ROLE_PASSIVE;
	passive_synack(skops, &nrec, 0);
	/* no room: the SYN-ACK goes out without ENO (no write callback follows);
	 * A then sends no ENO in its ACK and both ends fall back */
	if (nrec.synack_len)
		reserve(skops, nrec.synack_len);
	return CG_OK;
}

/* WRITE_HDR_OPT_CB of a SYN-ACK: the same decision, written. */
static __attribute__((noinline)) int synack_write(struct bpf_sock_ops *skops)
{
	struct eno_rec nrec = {};

	nrec.role = ROLE_PASSIVE;
	passive_synack(skops, &nrec, 0);
	if (nrec.synack_len)
		store_opt(skops, nrec.synack_opt, nrec.synack_len);
	return CG_OK;
}

/* ---- header option callbacks ----------------------------------------- */

static __attribute__((noinline)) int hdr_opt(struct bpf_sock_ops *skops, int write)
{
	struct eno_rec *rec;
	__u8 flags = skops->skb_tcp_flags;

	/* SYN-ACKs of our listeners are handled by synack_len()/synack_write() */
	rec = sk_rec(skops);
	if (!rec || rec->role != ROLE_ACTIVE)
		return CG_OK;

	if (flags & TCPHDR_SYN) {
		if (rec->state != ST_A_SYN_SENT || !rec->syn_len)
			return CG_OK;
		if (!write) {
			int no_room = reserve(skops, rec->syn_len);

			if (no_room && (rec->flags & F_OVERRIDE)) {
				/* the override (a resumption suboption: 12-21
				 * bytes) does not fit (e.g. MPTCP took 4 of the
				 * SYN's 20 free bytes): offer a fresh key
				 * exchange with the configured TEPs instead */
				struct eno_rec tmp = {};
				__u32 zero = 0;
				struct eno_cfg *cfg = bpf_map_lookup_elem(&eno_cfg, &zero);

				if (cfg && !build_syn_cfg(cfg, &tmp) && !reserve(skops, tmp.syn_len)) {
					copy_opt(rec->syn_opt, tmp.syn_opt, ENO_MAX);
					rec->syn_len = tmp.syn_len;
					rec->flags &= ~F_OVERRIDE;
					no_room = 0;
				}
			}
			if (no_room) {
				/* SYN goes out without ENO: plain TCP */
				rec->fallback = FB_NO_SPACE;
				rec->flags &= ~F_SYN_ENO;
				rec->syn_len = 0;
				rec->state = ST_DONE;
			}
		} else {
			store_opt(skops, rec->syn_opt, rec->syn_len);
		}
		return CG_OK;
	}

	if (rec->state == ST_A_ACK_ENO) {
		/* non-SYN form: kind 69, len 2 (also reserved for the mss
		 * computation, where there is no skb) */
		if (!write) {
			reserve(skops, 2);
		} else {
			__u8 o[2] = { TCPOPT_ENO, 2 };
			bpf_store_hdr_opt(skops, o, 2, 0);
		}
	}
	return CG_OK;
}

SEC("sockops")
int eno_sockops(struct bpf_sock_ops *skops)
{
	if (skip(skops))
		return CG_OK;

	switch (skops->op) {
	case BPF_SOCK_OPS_TCP_LISTEN_CB: {
		/* keep each SYN with its request sock and then its socket, for
		 * retransmitted SYN-ACKs and PASSIVE_ESTABLISHED */
		int one = 1;

		bpf_setsockopt(skops, SOL_TCP, TCP_SAVE_SYN, &one, sizeof(one));
		bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags |
					  BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG);
		break;
	}
	case BPF_SOCK_OPS_TCP_CONNECT_CB:
		active_connect(skops);
		break;
	case BPF_SOCK_OPS_HDR_OPT_LEN_CB:
		if ((skops->skb_tcp_flags & (TCPHDR_SYN | TCPHDR_ACK)) == (TCPHDR_SYN | TCPHDR_ACK))
			return synack_len(skops);
		return hdr_opt(skops, 0);
	case BPF_SOCK_OPS_WRITE_HDR_OPT_CB:
		if ((skops->skb_tcp_flags & (TCPHDR_SYN | TCPHDR_ACK)) == (TCPHDR_SYN | TCPHDR_ACK))
			return synack_write(skops);
		return hdr_opt(skops, 1);
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
		active_established(skops);
		break;
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
		passive_established(skops);
		break;
	case BPF_SOCK_OPS_PARSE_HDR_OPT_CB: {
		/* active opener received its first non-SYN segment (4.6) */
		struct eno_rec *rec;

		rec = sk_rec(skops);
		if (rec && rec->role == ROLE_ACTIVE && rec->state == ST_A_ACK_ENO)
			rec->state = ST_DONE;
		bpf_sock_ops_cb_flags_set(skops, 0);
		break;
	}
	}
	return CG_OK;
}

char _license[] SEC("license") = "GPL";
