//! fuzz_eno_diff: the BPF program's C parsers of the ENO option (tcpcrypt/eno-bpf/bpf/eno.bpf.c,
//! compiled for user space by build.rs: its inline-asm helpers have C forms outside
//! `__bpf__`, its BPF helpers are stubbed in c/eno_shim.c) against tcpcrypt-proto's (eno.rs), on
//! every input:
//!
//! 0. `eno_parse` vs `SynOption::parse_contents`: same verdict; for a valid option the same
//!    TEP set, first global suboption, number of TEP suboptions and last TEP; the bytes after
//!    the option in the C buffer do not matter.
//!    `eno_rules` (RFC 8548 §3.5 on A's suboptions: at most 9 + 8 bytes of data, one
//!    resumption offer per TEP) vs `resume::lengths_valid`.
//! 1. `eno_pick` vs `eno::negotiate` (the last TEP of B's option that A offered, RFC 8547 §4.5,
//!    and that meets RFC 8548 §3.5's rules: `resume::lengths_valid`; the fuzzer found the BPF
//!    program choosing a TEP whose suboption carried more than 9 + 8 bytes).
//! 2. `eno_find` (the ENO option among a segment's TCP options) vs a reference walk of the
//!    options written here (RFC 9293 §3.1: EOL, NOP, kind-length-value).
//! 3. `passive_synack` (the SYN-ACK's option for a SYN header and the configured TEPs) vs the
//!    same decision made with eno.rs, and vs `resume::synack_option` where the configured TEPs
//!    are tcpcrypt's.
//! 4. `active_established` (the active opener's verdict on a SYN-ACK: fallback reason, TEP,
//!    recorded option) vs `eno::negotiate` on the same two options.
use tcpcrypt_proto::eno::{self, Fallback, Policy, SynOption, TepSuboption};
use tcpcrypt_proto::{resume, Tep};

use crate::crypto::SEED_SYNACK;
use crate::{DetRng, Input};

#[repr(C)]
#[derive(Default, Clone, Copy, Debug)]
struct CParsed {
    teps: [u64; 2],
    global: u8,
    n_teps: u8,
    last_tep: u8,
}

extern "C" {
    fn fuzz_eno_parse(buf: *const u8, len: u32, out: *mut CParsed) -> i32;
    fn fuzz_eno_pick(hb: *const u8, lb: u32, a: *const CParsed, rules: u64) -> i32;
    fn fuzz_eno_rules(buf: *const u8, len: u32) -> u64;
    fn fuzz_eno_find(buf: *const u8, start: u32, olen: u32, out64: *mut u8) -> i32;
    #[allow(clippy::too_many_arguments)]
    fn fuzz_passive_synack(
        syn_hdr: *const u8,
        hdr_len: i32,
        cfg_present: i32,
        teps: *const u8,
        n_teps: u32,
        synack: *mut u8,
        syn: *mut u8,
        fallback: *mut u8,
        tep: *mut u8,
        syn_len: *mut u8,
    ) -> i32;
    #[allow(clippy::too_many_arguments)]
    fn fuzz_active_established(
        syn: *const u8,
        syn_len: u8,
        hdr: *const u8,
        hdr_len: u32,
        tep: *mut u8,
        flags: *mut u8,
        state: *mut u8,
        synack: *mut u8,
        synack_len: *mut u8,
    ) -> i32;
}

// The C side's fallback codes (eno.bpf.c).
const FB_NONE: u8 = 0;
const FB_SYN_NO_ENO: u8 = 1;
const FB_SYNACK_NO_ENO: u8 = 2;
const FB_ILL_FORMED: u8 = 4;
const FB_DUPLICATE: u8 = 5;
const FB_ROLE_CONFLICT: u8 = 6;
const FB_NO_COMMON_TEP: u8 = 7;
const FB_SYN_NOT_SAVED: u8 = 10;
const ENOENT: i32 = 2;

fn c_parse(buf: &[u8; 64], len: u32) -> (i32, CParsed) {
    let mut p = CParsed::default();
    // SAFETY: buf is 64 bytes, as the C side reads; p is a valid, writable CParsed whose
    // layout matches struct fuzz_parsed.
    let r = unsafe { fuzz_eno_parse(buf.as_ptr(), len, &mut p) };
    (r, p)
}

fn c_pick(hb: &[u8; 64], lb: u32, a: &CParsed, rules: u64) -> i32 {
    // SAFETY: hb is 64 bytes; a is a valid CParsed.
    unsafe { fuzz_eno_pick(hb.as_ptr(), lb, a, rules) }
}

fn c_rules(buf: &[u8; 64], len: u32) -> u64 {
    // SAFETY: buf is 64 bytes, as the C side reads.
    unsafe { fuzz_eno_rules(buf.as_ptr(), len) }
}

/// RFC 8548 §3.5's rules on a choice of B's suboption (`resume::lengths_valid`, what tcpcryptd
/// applies), for the TEP ids eno-bpf applies them to: 0x20-0x3f, which hold tcpcrypt's
/// 0x21-0x24 (tcpcryptd refuses any other TEP whatever its suboptions).
fn rules_valid(b: &TepSuboption, a_subs: &[TepSuboption]) -> bool {
    b.tep >= 0x40 || resume::lengths_valid(b, a_subs)
}

/// eno_rules' word for a valid option, from eno.rs and `resume`: bit (t - 0x20) when A's
/// suboptions of TEP t make it unusable, bit 32 + (t - 0x20) when A offers to resume t.
fn want_rules(o: &SynOption) -> u64 {
    let mut w = 0u64;
    for t in 0x20u8..0x40 {
        let subs: Vec<TepSuboption> = o.teps().filter(|s| s.tep == t).cloned().collect();
        if subs.is_empty() {
            continue;
        }
        if !resume::lengths_valid(&TepSuboption::plain(t), &subs) {
            w |= 1 << (t & 31);
        }
        if subs.iter().any(|s| matches!(resume::resume_fields(s), Ok(Some(_)))) {
            w |= 1 << (32 + (t & 31));
        }
    }
    w
}

fn c_find(buf: &[u8; 64], start: u32, olen: u32) -> (i32, [u8; 64]) {
    let mut out = [0u8; 64];
    // SAFETY: buf and out are 64 bytes, as the C side reads and writes.
    let r = unsafe { fuzz_eno_find(buf.as_ptr(), start, olen, out.as_mut_ptr()) };
    (r, out)
}

/// An option's contents (and, with `junk`, the bytes after it) in a 64-byte buffer.
fn option_buf(r: &mut Input, junk: bool) -> ([u8; 64], u32) {
    let clen = usize::from(r.u8() % 39);
    let mut buf = [0u8; 64];
    buf[0] = eno::KIND;
    buf[1] = (clen + 2) as u8;
    let c = r.take(clen);
    buf[2..2 + c.len()].copy_from_slice(c);
    if junk {
        let j = r.take(64 - 2 - clen);
        buf[2 + clen..2 + clen + j.len()].copy_from_slice(j);
    }
    (buf, (clen + 2) as u32)
}

fn bitmap(o: &SynOption) -> [u64; 2] {
    let mut bm = [0u64; 2];
    for t in o.teps() {
        bm[usize::from(t.tep >> 6) & 1] |= 1u64 << (t.tep & 63);
    }
    bm
}

/// The reference walk over TCP options: (result as eno_find returns it, offset of the ENO option).
fn ref_find(buf: &[u8; 64], start: usize, olen: usize) -> (i32, usize) {
    let olen = olen.min(40);
    let b = |i: usize| buf[(start + i) & 63];
    let (mut pos, mut count, mut first) = (0usize, 0, 0usize);
    while pos < olen {
        let k = b(pos);
        if k == 0 {
            break;
        }
        if k == 1 {
            pos += 1;
            continue;
        }
        if pos + 1 >= olen {
            return (-2, 0);
        }
        let l = usize::from(b(pos + 1));
        if l < 2 || pos + l > olen {
            return (-2, 0);
        }
        if k == eno::KIND {
            if count == 0 {
                first = start + pos;
            }
            count += 1;
        }
        pos += l;
    }
    match count {
        0 => (0, 0),
        1 => {
            let flen = buf[(first + 1) & 63];
            if flen > 40 {
                (-2, first)
            } else {
                (i32::from(flen), first)
            }
        }
        _ => (-1, 0),
    }
}

/// One execution; returns what it reached (see [`reached`]).
pub fn run(data: &[u8]) -> u32 {
    let mut r = Input::new(data);
    match r.u8() % 5 {
        0 => diff_parse(&mut r),
        1 => diff_pick(&mut r),
        2 => diff_find(&mut r),
        3 => diff_synack(&mut r),
        _ => diff_active(&mut r),
    }
}

/// Outcomes a run reached (the corpus regression checks that the seeds reach each).
pub mod reached {
    pub const PARSE_OK: u32 = 1 << 0;
    pub const PARSE_BAD: u32 = 1 << 1;
    pub const PICK_TEP: u32 = 1 << 2;
    pub const PICK_NONE: u32 = 1 << 3;
    pub const FIND_ONE: u32 = 1 << 4;
    pub const FIND_DUP: u32 = 1 << 5;
    pub const FIND_BAD: u32 = 1 << 6;
    pub const SYNACK_TEP: u32 = 1 << 7;
    pub const SYNACK_VACUOUS: u32 = 1 << 8;
    pub const SYNACK_NONE: u32 = 1 << 9;
    pub const ACTIVE_TEP: u32 = 1 << 10;
    pub const ACTIVE_FALLBACK: u32 = 1 << 11;
    pub const ACTIVE_DUP: u32 = 1 << 12;
    pub const ALL: u32 = (1 << 13) - 1;
}

fn diff_parse(r: &mut Input) -> u32 {
    let kl = r.array::<2>();
    let (mut buf, len) = option_buf(r, true);
    buf[0] = kl[0];
    buf[1] = kl[1];
    let rust = SynOption::parse_contents(&buf[2..len as usize]);
    let (rc, p) = c_parse(&buf, len);
    // The bytes past the option must not matter.
    let mut other = buf;
    for b in &mut other[len as usize..] {
        *b = !*b;
    }
    let (rc2, p2) = c_parse(&other, len);
    assert_eq!(rc, rc2, "eno_parse depends on bytes after the option");
    match &rust {
        Ok(o) => {
            assert_eq!(rc, 0, "C rejects what eno.rs accepts: {:02x?} ({o:?})", &buf[..len as usize]);
            assert_eq!(p.teps, bitmap(o), "TEP sets differ: {:02x?}", &buf[..len as usize]);
            assert_eq!(p.global, o.global().0, "global suboption");
            assert_eq!(usize::from(p.n_teps), o.teps().count(), "number of TEP suboptions");
            assert_eq!(p.last_tep, o.teps().last().map_or(0, |t| t.tep), "last TEP");
            assert_eq!((p2.teps, p2.global, p2.n_teps, p2.last_tep), (p.teps, p.global, p.n_teps, p.last_tep));
            assert_eq!(c_rules(&buf, len), want_rules(o), "eno_rules: {:02x?}", &buf[..len as usize]);
            assert_eq!(c_rules(&other, len), want_rules(o), "eno_rules depends on bytes after the option");
        }
        Err(e) => assert_eq!(rc, -1, "C accepts what eno.rs rejects ({e:?}): {:02x?}", &buf[..len as usize]),
    }
    // Lengths outside 2..=40 are refused.
    let bad_len = u32::from(r.u8() % 64);
    if !(2..=40).contains(&bad_len) {
        assert_eq!(c_parse(&buf, bad_len).0, -1);
    }
    if rust.is_ok() {
        reached::PARSE_OK
    } else {
        reached::PARSE_BAD
    }
}

fn diff_pick(r: &mut Input) -> u32 {
    let (abuf, la) = option_buf(r, false);
    let (bbuf, lb) = option_buf(r, false);
    let a_opt = &abuf[..la as usize];
    let b_opt = &bbuf[..lb as usize];
    let (rc_a, pa) = c_parse(&abuf, la);
    let ra = SynOption::parse(a_opt);
    assert_eq!(rc_a == 0, ra.is_ok());
    let Ok(ra) = ra else { return reached::PARSE_BAD };
    let pick = c_pick(&bbuf, lb, &pa, c_rules(&abuf, la));
    let rb = SynOption::parse(b_opt);
    let a_subs = |tep: u8| -> Vec<TepSuboption> { ra.teps().filter(|s| s.tep == tep).cloned().collect() };
    let want = match &rb {
        Err(_) => 0,
        Ok(b) => b
            .teps()
            .rev()
            .find(|t| {
                let subs = a_subs(t.tep);
                !subs.is_empty() && rules_valid(t, &subs)
            })
            .map_or(0, |t| i32::from(t.tep)),
    };
    assert_eq!(pick, want, "eno_pick: A {a_opt:02x?} B {b_opt:02x?}");
    // The same through eno.rs's negotiation, where the roles are right.
    if let Ok(b) = &rb {
        if !ra.global().b() && b.global().b() {
            let policy = Policy { teps: (0x20..=0x7f).collect(), mandatory_app_aware: false };
            match eno::negotiate(a_opt, b_opt, &policy, rules_valid) {
                Ok(n) => assert_eq!(i32::from(n.tep()), pick, "negotiate vs eno_pick"),
                Err(Fallback::NoCommonTep) => assert_eq!(pick, 0, "negotiate found no TEP, eno_pick {pick:#x}"),
                Err(f) => panic!("negotiate: {f:?}"),
            }
        }
    }
    if pick != 0 {
        reached::PICK_TEP
    } else {
        reached::PICK_NONE
    }
}

fn diff_find(r: &mut Input) -> u32 {
    let start = usize::from(r.u8() % 21);
    let olen = usize::from(r.u8() % 48);
    let buf = r.array::<64>();
    let (rc, out) = c_find(&buf, start as u32, olen as u32);
    let (want, first) = ref_find(&buf, start, olen);
    assert_eq!(rc, want, "eno_find: start {start} olen {olen} {:02x?}", &buf[start..(start + olen).min(64)]);
    if rc > 0 {
        let n = rc as usize;
        assert_eq!(&out[..n], &buf[first..first + n]);
    }
    match rc {
        -1 => reached::FIND_DUP,
        r if r < 0 => reached::FIND_BAD,
        0 => 0,
        _ => reached::FIND_ONE,
    }
}

fn diff_synack(r: &mut Input) -> u32 {
    let flags = r.u8();
    let optlen = usize::from(r.u8() % 41);
    let mut hdr = [0u8; 64];
    let fixed = r.take(20);
    hdr[..fixed.len()].copy_from_slice(fixed);
    let opts = r.take(optlen);
    hdr[20..20 + opts.len()].copy_from_slice(opts);
    // Mostly a well-placed ENO option: the fuzzer gives its contents.
    if flags & 1 == 0 && optlen >= 2 {
        let at = usize::from(r.u8()) % optlen;
        let l = (optlen - at).min(2 + usize::from(r.u8() % 39));
        if l >= 2 {
            hdr[20 + at] = eno::KIND;
            hdr[20 + at + 1] = l as u8;
            for b in &mut hdr[20..20 + at] {
                *b = 1; // NOPs before it
            }
            if at + l < optlen {
                hdr[20 + at + l] = 0; // EOL after it
            }
        }
    }
    // Sometimes no readable SYN: too short, or -ENOENT (not saved: a SYN cookie).
    let hdr_len: i32 = match (flags & 2 != 0, flags & 16 != 0) {
        (false, _) => 20 + optlen as i32,
        (true, false) => i32::from(r.u8() % 20),
        (true, true) => -ENOENT,
    };
    let cfg_present = flags & 4 == 0;
    let n_teps = usize::from(r.u8() % 6);
    let teps: Vec<u8> = if flags & 8 == 0 {
        (0..n_teps).map(|_| [0x23, 0x21, 0x22][usize::from(r.u8()) % 3]).collect()
    } else {
        r.take(n_teps).to_vec()
    };
    let (mut synack, mut syn) = ([0u8; 40], [0u8; 40]);
    let (mut fb, mut tep, mut syn_len) = (0u8, 0u8, 0u8);
    // SAFETY: hdr is 64 bytes (the C side reads at most hdr_len <= 60 of it); teps holds
    // n_teps bytes; synack and syn are 40 bytes, as written; the rest are single bytes.
    let synack_len = unsafe {
        fuzz_passive_synack(
            hdr.as_ptr(),
            hdr_len,
            i32::from(cfg_present),
            teps.as_ptr(),
            teps.len() as u32,
            synack.as_mut_ptr(),
            syn.as_mut_ptr(),
            &mut fb,
            &mut tep,
            &mut syn_len,
        )
    };
    // The same decision with eno.rs (and the reference option walk).
    let mut want_syn: Option<Vec<u8>> = None;
    let (want_fb, want_synack): (u8, Vec<u8>) = if hdr_len == -ENOENT {
        (FB_SYN_NOT_SAVED, vec![])
    } else if hdr_len < 20 {
        (FB_SYN_NO_ENO, vec![])
    } else {
        match ref_find(&hdr, 20, hdr_len as usize - 20) {
            (0, _) => (FB_SYN_NO_ENO, vec![]),
            (-1, _) => (FB_DUPLICATE, vec![]),
            (n, _) if !(0..=40).contains(&n) => (FB_ILL_FORMED, vec![]),
            (n, first) => {
                let opt = hdr[first..first + n as usize].to_vec();
                want_syn = Some(opt.clone());
                match SynOption::parse(&opt) {
                    Err(_) => (FB_ILL_FORMED, vec![]),
                    Ok(o) if o.global().b() => (FB_ROLE_CONFLICT, vec![]),
                    Ok(o) => {
                        let cfg: &[u8] = if cfg_present { &teps } else { &[] };
                        let usable = |t: u8| {
                            let subs: Vec<TepSuboption> = o.teps().filter(|s| s.tep == t).cloned().collect();
                            t >= 0x20 && !subs.is_empty() && rules_valid(&TepSuboption::plain(t), &subs)
                        };
                        match cfg.iter().map(|t| t & 0x7f).find(|&t| usable(t)) {
                            Some(t) => (FB_NONE, vec![eno::KIND, 4, 0x01, t]),
                            None => (FB_NO_COMMON_TEP, vec![eno::KIND, 3, 0x01]),
                        }
                    }
                }
            }
        }
    };
    let ctx = format!("SYN header {:02x?} (len {hdr_len}), cfg {teps:02x?} present {cfg_present}", &hdr[..hdr_len.clamp(0, 60) as usize]);
    assert_eq!(fb, want_fb, "fallback: {ctx}");
    assert_eq!(&synack[..synack_len as usize], &want_synack[..], "SYN-ACK option: {ctx}");
    assert_eq!(tep, if want_fb == FB_NONE { want_synack[3] } else { 0 }, "record's TEP: {ctx}");
    match want_syn {
        Some(s) => assert_eq!(&syn[..usize::from(syn_len)], &s[..], "recorded SYN option: {ctx}"),
        None => assert_eq!(syn_len, 0),
    }
    // tcpcrypt-proto's own SYN-ACK builder, where the configuration is tcpcrypt TEPs.
    if let Some(opt) = want_syn_opt(&hdr, hdr_len) {
        let cfg: Vec<Tep> = if cfg_present { teps.iter().filter_map(|&t| Tep::from_id(t)).collect() } else { vec![] };
        if !cfg_present || cfg.len() == teps.len() {
            let (rs, _) = resume::synack_option(&opt, &cfg, None, 8, &mut DetRng::new(SEED_SYNACK));
            assert_eq!(rs, &synack[..synack_len as usize], "resume::synack_option vs BPF: {ctx}");
        }
    }
    match synack_len {
        4 => reached::SYNACK_TEP,
        3 => reached::SYNACK_VACUOUS,
        _ => reached::SYNACK_NONE,
    }
}

/// The SYN's ENO option as the BPF program records it (None: none, duplicate or unreadable).
fn want_syn_opt(hdr: &[u8; 64], hdr_len: i32) -> Option<Vec<u8>> {
    if hdr_len < 20 {
        return None;
    }
    match ref_find(hdr, 20, hdr_len as usize - 20) {
        (n, first) if (2..=40).contains(&n) => Some(hdr[first..first + n as usize].to_vec()),
        _ => None,
    }
}

fn diff_active(r: &mut Input) -> u32 {
    let flags = r.u8();
    // Our SYN option: mostly what the program builds from its configuration (TEPs, v = 0),
    // sometimes any bytes (the per-socket override can carry anything).
    let mut syn = [0u8; 40];
    let syn_len: usize;
    if flags & 1 == 0 {
        let n = usize::from(r.u8() % 6) + 1;
        syn[0] = eno::KIND;
        syn[1] = (2 + n) as u8;
        for k in 0..n {
            syn[2 + k] = [0x23, 0x21, 0x22, 0x24, 0x7f][usize::from(r.u8()) % 5];
        }
        syn_len = 2 + n;
    } else {
        let n = usize::from(r.u8() % 39);
        syn[0] = eno::KIND;
        syn[1] = (2 + n) as u8;
        let c = r.take(n);
        syn[2..2 + c.len()].copy_from_slice(c);
        syn_len = 2 + n;
    }
    // The SYN-ACK's TCP header: data offset from the input or from the options' length.
    let optlen = usize::from(r.u8() % 41);
    let mut hdr = [0u8; 64];
    let fixed = r.take(20);
    hdr[..fixed.len()].copy_from_slice(fixed);
    let opts = r.take(optlen);
    hdr[20..20 + opts.len()].copy_from_slice(opts);
    if flags & 2 == 0 {
        hdr[12] = (((20 + optlen.div_ceil(4) * 4) / 4) as u8) << 4;
    }
    if flags & 4 == 0 && optlen >= 3 {
        // A placed ENO option with fuzzer contents, NOPs before, EOL after.
        let at = usize::from(r.u8()) % (optlen - 2);
        let l = (optlen - at).min(3 + usize::from(r.u8() % 38));
        hdr[20 + at] = eno::KIND;
        hdr[20 + at + 1] = l as u8;
        hdr[20..20 + at].fill(1);
        if flags & 8 == 0 {
            hdr[20 + at + 2] |= 0x01; // b = 1 (most SYN-ACKs)
            hdr[20 + at + 2] &= !0x80;
            if hdr[20 + at + 2] >= 0x20 {
                hdr[20 + at + 2] = 0x01;
            }
        }
        if at + l < optlen {
            hdr[20 + at + l] = 0;
        }
    }
    let hdr_len = if flags & 16 == 0 { 20 + optlen.div_ceil(4) * 4 } else { usize::from(r.u8() % 61) };
    let (mut tep, mut rflags, mut state, mut synack, mut synack_len) = (0u8, 0u8, 0u8, [0u8; 40], 0u8);
    // SAFETY: syn is 40 bytes and hdr 64 (the C side copies at most 60); the outputs are a
    // 40-byte buffer and single bytes.
    let fb = unsafe {
        fuzz_active_established(
            syn.as_ptr(),
            syn_len as u8,
            hdr.as_ptr(),
            hdr_len as u32,
            &mut tep,
            &mut rflags,
            &mut state,
            synack.as_mut_ptr(),
            &mut synack_len,
        )
    } as u8;
    // The reference: what a segment of hdr_len bytes holds, then eno.rs.
    let olen = if hdr_len >= 20 {
        (usize::from(hdr[12] >> 4) * 4).saturating_sub(20).min(40).min(hdr_len - 20)
    } else {
        0
    };
    let mut opt_buf = [0u8; 64];
    opt_buf[..olen].copy_from_slice(&hdr[20..20 + olen]);
    let (n, first) = ref_find(&opt_buf, 0, olen);
    let ours = &syn[..syn_len];
    let ctx = format!("SYN {ours:02x?}, SYN-ACK options {:02x?}", &opt_buf[..olen]);
    assert_eq!(rflags & 0x01 != 0, n != 0, "F_ACK_HAD_ENO: {ctx}");
    let want_fb = match n {
        0 => FB_SYNACK_NO_ENO,
        -1 => FB_DUPLICATE,
        n if n < 0 => FB_ILL_FORMED,
        n => {
            let theirs = &opt_buf[first..first + n as usize];
            assert_eq!(&synack[..usize::from(synack_len)], theirs, "recorded SYN-ACK option: {ctx}");
            let policy = Policy { teps: (0x20..=0x7f).collect(), mandatory_app_aware: false };
            match eno::negotiate(ours, theirs, &policy, rules_valid) {
                Ok(neg) => {
                    assert_eq!(tep, neg.tep(), "negotiated TEP: {ctx}");
                    FB_NONE
                }
                Err(Fallback::RemoteMalformed(_) | Fallback::LocalMalformed(_)) => FB_ILL_FORMED,
                Err(Fallback::SameRole) => FB_ROLE_CONFLICT,
                Err(Fallback::NoCommonTep) => FB_NO_COMMON_TEP,
                Err(f) => panic!("negotiate: {f:?}"),
            }
        }
    };
    assert_eq!(fb, want_fb, "active opener's fallback: {ctx}");
    if fb != FB_NONE {
        assert_eq!(tep, 0, "TEP recorded with a fallback: {ctx}");
        assert_eq!(state, 4, "ST_DONE after a fallback");
    } else {
        assert_eq!(state, 2, "ST_A_ACK_ENO after success");
    }
    match fb {
        FB_NONE => reached::ACTIVE_TEP,
        FB_DUPLICATE => reached::ACTIVE_DUP,
        _ => reached::ACTIVE_FALLBACK,
    }
}
