/*
 * fuzz_eno_diff's C side: the BPF program's own source (eno.bpf.c, whose inline-asm helpers
 * have C forms outside __bpf__) compiled for user space, with the BPF helpers stubbed here. Exposes the ENO parsers and the passive opener's SYN-ACK decision
 * to Rust (src/eno_diff.rs).
 */
#include <string.h>
#include <linux/bpf.h>
#include "eno.bpf.c"

/* ---- helper stubs: one fake connection at a time ---------------------------------- */
static struct eno_cfg stub_cfg;
static int stub_cfg_present;
static __u8 stub_syn_hdr[64];
static int stub_syn_hdr_len;   /* what bpf_getsockopt(TCP_BPF_SYN) returns */
/* The connection's record, wherever the program keeps it (socket storage now, an LRU map
 * keyed by the 4-tuple before): every map but eno_cfg and the SYN override resolves here. */
static struct eno_rec stub_rec;
static int stub_rec_present;

void *bpf_map_lookup_elem(void *map, const void *key)
{
	(void)key;
	if (map == (void *)&eno_cfg)
		return stub_cfg_present ? &stub_cfg : NULL;
	if (map == (void *)&eno_resume)
		return NULL;   /* the daemon holds no tickets */
	return stub_rec_present ? &stub_rec : NULL;
}
long bpf_map_delete_elem(void *map, const void *key)
{
	(void)map; (void)key;
	return -2;
}
long bpf_map_update_elem(void *map, const void *key, const void *value, __u64 flags)
{
	(void)map; (void)key; (void)value; (void)flags;
	return 0;
}
long bpf_sock_ops_cb_flags_set(struct bpf_sock_ops *skops, int flags)
{
	(void)skops; (void)flags;
	return 0;
}
long bpf_getsockopt(void *ctx, int level, int optname, void *optval, int optlen)
{
	(void)ctx;
	if (level != SOL_TCP || optname != TCP_BPF_SYN)
		return -22;
	if (stub_syn_hdr_len < 0)
		return stub_syn_hdr_len;
	int n = stub_syn_hdr_len < optlen ? stub_syn_hdr_len : optlen;
	memcpy(optval, stub_syn_hdr, (size_t)n);
	return n;
}
long bpf_setsockopt(void *ctx, int level, int optname, void *optval, int optlen)
{
	(void)ctx; (void)level; (void)optname; (void)optval; (void)optlen;
	return 0;
}
long bpf_loop(__u32 nr_loops, void *callback_fn, void *callback_ctx, __u64 flags)
{
	(void)nr_loops; (void)callback_fn; (void)callback_ctx; (void)flags;
	return -22;
}
void *bpf_sk_storage_get(void *map, void *sk, void *value, __u64 flags)
{
	(void)sk; (void)value; (void)flags;
	if (map == (void *)&eno_sk_syn)
		return NULL;   /* no per-socket SYN override */
	return stub_rec_present ? &stub_rec : NULL;
}
long bpf_reserve_hdr_opt(struct bpf_sock_ops *skops, __u32 len, __u64 flags)
{
	(void)skops; (void)len; (void)flags;
	return 0;
}
long bpf_store_hdr_opt(struct bpf_sock_ops *skops, const void *from, __u32 len, __u64 flags)
{
	(void)skops; (void)from; (void)len; (void)flags;
	return 0;
}
long bpf_load_hdr_opt(struct bpf_sock_ops *skops, void *searchby_res, __u32 len, __u64 flags)
{
	(void)skops; (void)searchby_res; (void)len; (void)flags;
	return -2;
}

/* ---- entry points for Rust ------------------------------------------------------- */
struct fuzz_parsed {
	__u64 teps[2];
	__u8 global;
	__u8 n_teps;
	__u8 last_tep;
};

static void export_parsed(const struct parsed *p, struct fuzz_parsed *out)
{
	out->teps[0] = p->teps[0];
	out->teps[1] = p->teps[1];
	out->global = p->global;
	out->n_teps = p->n_teps;
	out->last_tep = p->last_tep;
}

/* buf: 64 bytes (the BPF program's buffers are 64 bytes, only [0, len) is the option) */
int fuzz_eno_parse(const __u8 *buf, __u32 len, struct fuzz_parsed *out)
{
	struct obuf ob;
	struct parsed p;
	int r;

	memcpy(ob.b, buf, BUF);
	memset(&p, 0xa5, sizeof(p));
	r = eno_parse(&ob, len, &p);
	export_parsed(&p, out);
	return r;
}

/* buf: 64 bytes, a well-formed option in [0, len) */
__u64 fuzz_eno_rules(const __u8 *buf, __u32 len)
{
	struct obuf ob;

	memcpy(ob.b, buf, BUF);
	return eno_rules(&ob, len);
}

int fuzz_eno_pick(const __u8 *hb, __u32 lb, const struct fuzz_parsed *a, __u64 rules)
{
	struct obuf ob;
	struct parsed pa;

	memcpy(ob.b, hb, BUF);
	memset(&pa, 0, sizeof(pa));
	pa.teps[0] = a->teps[0];
	pa.teps[1] = a->teps[1];
	pa.global = a->global;
	pa.n_teps = a->n_teps;
	pa.last_tep = a->last_tep;
	return eno_pick(&ob, lb, &pa, rules);
}

int fuzz_eno_find(const __u8 *buf, __u32 start, __u32 olen, __u8 *out64)
{
	struct obuf ob, out;
	int r;

	memcpy(ob.b, buf, BUF);
	memset(out.b, 0, BUF);
	r = eno_find(&ob, start, olen, &out);
	memcpy(out64, out.b, BUF);
	return r;
}

/*
 * The passive opener's decision for a SYN whose TCP header (20 bytes + options) is
 * syn_hdr[0..hdr_len) (hdr_len < 0: bpf_getsockopt's error), with the configured TEPs
 * (cfg_present = 0: no config entry). Fills synack[40] and returns synack_len; *fallback,
 * *tep, *syn_len (and syn[40]) are the record's fields.
 */
int fuzz_passive_synack(const __u8 *syn_hdr, int hdr_len, int cfg_present, const __u8 *teps,
			__u32 n_teps, __u8 *synack, __u8 *syn, __u8 *fallback, __u8 *tep,
			__u8 *syn_len)
{
	struct eno_rec rec;

	memset(stub_syn_hdr, 0, sizeof(stub_syn_hdr));
	if (hdr_len > 64)
		hdr_len = 64;
	if (hdr_len > 0)
		memcpy(stub_syn_hdr, syn_hdr, (size_t)hdr_len);
	stub_syn_hdr_len = hdr_len;
	memset(&stub_cfg, 0, sizeof(stub_cfg));
	stub_cfg_present = cfg_present;
	if (n_teps > 32)
		n_teps = 32;
	stub_cfg.n_teps = (__u8)n_teps;
	memcpy(stub_cfg.teps, teps, n_teps);

	memset(&rec, 0, sizeof(rec));
	rec.role = ROLE_PASSIVE;
	passive_synack(NULL, &rec, 0);
	memcpy(synack, rec.synack_opt, ENO_MAX);
	memcpy(syn, rec.syn_opt, ENO_MAX);
	*fallback = rec.fallback;
	*tep = rec.tep;
	*syn_len = rec.syn_len;
	return rec.synack_len;
}

/*
 * The active opener's handling of the SYN-ACK: our SYN option syn[0..syn_len) is in the
 * record (state SYN sent), the SYN-ACK's TCP header is hdr[0..hdr_len). Returns the
 * record's fallback; *tep, *flags, *state, synack[40] and *synack_len are its fields.
 */
int fuzz_active_established(const __u8 *syn, __u8 syn_len, const __u8 *hdr, __u32 hdr_len,
			    __u8 *tep, __u8 *flags, __u8 *state, __u8 *synack, __u8 *synack_len)
{
	static __u8 pkt[64];
	struct bpf_sock_ops skops;

	memset(&stub_rec, 0, sizeof(stub_rec));
	stub_rec_present = 1;
	stub_rec.role = ROLE_ACTIVE;
	stub_rec.state = ST_A_SYN_SENT;
	stub_rec.flags = F_SYN_ENO;
	memcpy(stub_rec.syn_opt, syn, ENO_MAX);
	stub_rec.syn_len = syn_len;
	if (hdr_len > 60)
		hdr_len = 60;
	memset(pkt, 0, sizeof(pkt));
	memcpy(pkt, hdr, hdr_len);
	memset(&skops, 0, sizeof(skops));
	skops.family = AF_INET;
	skops.sk = (struct bpf_sock *)(void *)&stub_rec;   /* any non-NULL socket */
	skops.skb_data = pkt;
	skops.skb_data_end = pkt + hdr_len;
	active_established(&skops);
	stub_rec_present = 0;
	*tep = stub_rec.tep;
	*flags = stub_rec.flags;
	*state = stub_rec.state;
	memcpy(synack, stub_rec.synack_opt, ENO_MAX);
	*synack_len = stub_rec.synack_len;
	return stub_rec.fallback;
}
