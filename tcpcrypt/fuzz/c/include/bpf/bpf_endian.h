/* User-space stand-in for libbpf's bpf_endian.h (fuzz_eno_diff only; little-endian host). */
#ifndef FUZZ_BPF_ENDIAN_H
#define FUZZ_BPF_ENDIAN_H
#define bpf_htons(x) __builtin_bswap16((__u16)(x))
#define bpf_ntohs(x) __builtin_bswap16((__u16)(x))
#define bpf_htonl(x) __builtin_bswap32((__u32)(x))
#define bpf_ntohl(x) __builtin_bswap32((__u32)(x))
#endif
