/* User-space stand-in for libbpf's bpf_helpers.h, for fuzz_eno_diff only: eno.bpf.c
 * compiled for the host. The helpers are ordinary functions defined in eno_shim.c. */
#ifndef FUZZ_BPF_HELPERS_H
#define FUZZ_BPF_HELPERS_H
#include <linux/types.h>

#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) __typeof__(val) *name
#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif

struct bpf_sock_ops;
void *bpf_map_lookup_elem(void *map, const void *key);
long bpf_map_update_elem(void *map, const void *key, const void *value, __u64 flags);
long bpf_map_delete_elem(void *map, const void *key);
long bpf_sock_ops_cb_flags_set(struct bpf_sock_ops *skops, int flags);
long bpf_getsockopt(void *ctx, int level, int optname, void *optval, int optlen);
long bpf_setsockopt(void *ctx, int level, int optname, void *optval, int optlen);
long bpf_loop(__u32 nr_loops, void *callback_fn, void *callback_ctx, __u64 flags);
void *bpf_sk_storage_get(void *map, void *sk, void *value, __u64 flags);
long bpf_reserve_hdr_opt(struct bpf_sock_ops *skops, __u32 len, __u64 flags);
long bpf_store_hdr_opt(struct bpf_sock_ops *skops, const void *from, __u32 len, __u64 flags);
long bpf_load_hdr_opt(struct bpf_sock_ops *skops, void *searchby_res, __u32 len, __u64 flags);
#endif
