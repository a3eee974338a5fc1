//! tcpcrypt on top of TCP-ENO: which SYN options to send, how to negotiate (incl. the
//! validity rules of tcpcrypt suboptions) and session caching/resumption (RFC 8548 §3.2, §3.5).

use rand_core::{CryptoRng, RngCore};

use crate::consts::*;
use crate::eno::{self, Fallback, Global, Negotiated, Policy, Role, SynOption, TepSuboption};
use crate::keys::{self, Secret};
use crate::suite::{Aead, Tep};

/// A cached session secret ss[i] that can resume a session (§3.5).
#[derive(Debug, Clone)]
pub struct ResumeTicket {
    /// The TEP of the original session.
    pub tep: Tep,
    /// The AEAD of the original session (resumption has no Init1/Init2 to negotiate one).
    pub aead: Aead,
    /// Our role in the original session with ss[0]: decides k_ab vs k_ba and our half.
    pub orig_role: Role,
    /// i.
    pub index: u64,
    pub(crate) ss: Secret,
    /// resume[i].
    pub id: [u8; RESUME_ID_LEN],
    /// resume[1] of the chain this secret descends from (the ss[0] of one fresh key exchange):
    /// names the chain, so a cache can tell a new chain from a later link of one it follows.
    pub lineage: [u8; RESUME_ID_LEN],
}

impl ResumeTicket {
    pub(crate) fn new(tep: Tep, aead: Aead, orig_role: Role, index: u64, ss: Secret) -> Self {
        let id = keys::resume_id(&ss);
        ResumeTicket { tep, aead, orig_role, index, ss, id, lineage: id }
    }
    /// ss[i+1] = CPRF(ss[i], CONST_NEXTK, K_LEN) as a ticket of the same chain (§3.5).
    pub fn successor(&self) -> ResumeTicket {
        let mut t = ResumeTicket::new(self.tep, self.aead, self.orig_role, self.index + 1, keys::next_session_secret(&self.ss));
        t.lineage = self.lineage;
        t
    }
    /// Whether this is ss[1]: the first successor of a fresh key exchange's ss[0], which starts a
    /// chain (every later ss[i] of the chain is derived by the cache that holds ss[1]).
    pub fn starts_chain(&self) -> bool {
        self.index == 1
    }
    /// What an ENO source needs to answer a SYN naming this secret: its TEP and both halves.
    pub fn name(&self) -> ResumeName {
        ResumeName { tep: self.tep, peer_half: self.peer_half(), my_half: self.my_half() }
    }
    fn half(&self, role: Role) -> [u8; RESUME_HALF_LEN] {
        let mut h = [0u8; RESUME_HALF_LEN];
        match role {
            Role::A => h.copy_from_slice(&self.id[..RESUME_HALF_LEN]),
            Role::B => h.copy_from_slice(&self.id[RESUME_HALF_LEN..]),
        }
        h
    }
    /// The half of resume[i] we send (by our original role, Figures 2 and 3).
    pub fn my_half(&self) -> [u8; RESUME_HALF_LEN] {
        self.half(self.orig_role)
    }
    /// The half the peer sends.
    pub fn peer_half(&self) -> [u8; RESUME_HALF_LEN] {
        self.half(self.orig_role.peer())
    }
    /// The resumption suboption: TEP with v = 1, our half, our nonce (0..=8 bytes).
    pub fn suboption(&self, nonce: &[u8]) -> TepSuboption {
        let mut data = self.my_half().to_vec();
        data.extend_from_slice(&nonce[..nonce.len().min(MAX_RESUME_NONCE_LEN)]);
        TepSuboption::with_data(self.tep.id(), data)
    }
}

/// A cached secret as a passive opener's ENO source knows it (eno-bpf's `eno_resume` entry): a
/// SYN for `tep` naming `peer_half` is answered with `my_half`. No secret in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ResumeName {
    /// The TEP of the original session.
    pub tep: Tep,
    /// The half of resume[i] the peer sends.
    pub peer_half: [u8; RESUME_HALF_LEN],
    /// The half we answer with.
    pub my_half: [u8; RESUME_HALF_LEN],
}

/// A passive opener's store of cached secrets, as [`synack_option`] asks it: take (single use)
/// the secret a SYN's identifier half names, if held for that TEP.
pub trait TicketSource {
    /// The ticket whose peer half is `half`, for `tep`, taken out (never handed out twice).
    fn take_by_peer_half(&mut self, half: &[u8; RESUME_HALF_LEN], tep: Tep) -> Option<ResumeTicket>;
}

/// A resumption suboption's identifier half and nonce.
pub type ResumeFields<'a> = ([u8; RESUME_HALF_LEN], &'a [u8]);

/// Suboption data longer than a half plus an 8-byte nonce: not a valid tcpcrypt suboption.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidResume;

/// A resumption suboption's content, if it is one: (identifier half, nonce). Data shorter
/// than 9 bytes means "fresh key exchange" (§3.5); longer than 17 is invalid.
pub fn resume_fields(sub: &TepSuboption) -> Result<Option<ResumeFields<'_>>, InvalidResume> {
    if !sub.v || sub.data.len() < RESUME_HALF_LEN {
        return Ok(None);
    }
    if sub.data.len() > RESUME_HALF_LEN + MAX_RESUME_NONCE_LEN {
        return Err(InvalidResume);
    }
    let mut h = [0u8; RESUME_HALF_LEN];
    h.copy_from_slice(&sub.data[..RESUME_HALF_LEN]);
    Ok(Some((h, &sub.data[RESUME_HALF_LEN..])))
}

/// The SYN-form option an active opener sends: our TEPs (least preferred first, so that a
/// peer in role B that echoes our order as priority picks ours; A does not influence
/// priority per §4.5) and optionally one resumption suboption, placed last so its length is
/// implied.
pub fn syn_option(teps: &[Tep], resume: Option<&TepSuboption>) -> Result<Vec<u8>, eno::EnoError> {
    let mut subs: Vec<TepSuboption> = teps
        .iter()
        .rev()
        .filter(|t| resume.is_none_or(|r| r.tep != t.id()))
        .map(|t| TepSuboption::plain(t.id()))
        .collect();
    if let Some(r) = resume {
        subs.push(r.clone());
    }
    SynOption::new(None, subs).encode()
}

/// What a passive opener puts in its SYN-ACK for a received SYN option (empty = no ENO):
/// `b = 1` and exactly one TEP (§4.5 SHOULD): the most preferred of ours that A offered,
/// as a resumption suboption if A offered resumption of a ticket we hold (the ticket is
/// then returned and must be given to [`crate::Session`]).
pub fn synack_option<R: RngCore + CryptoRng>(
    syn: &[u8],
    teps: &[Tep],
    cache: Option<&mut dyn TicketSource>,
    resume_nonce_len: usize,
    rng: &mut R,
) -> (Vec<u8>, Option<ResumeTicket>) {
    let Ok(a) = SynOption::parse(syn) else { return (Vec::new(), None) };
    if syn.is_empty() || a.global().b() {
        return (Vec::new(), None);
    }
    let global = Some(Global::new(false, true));
    // A TEP whose suboptions from A break §3.5 (too long, two resumption offers) cannot be
    // negotiated (`lengths_valid`): not answered, as eno-bpf does not answer it.
    let usable = |t: &Tep| {
        let subs: Vec<TepSuboption> = a.teps().filter(|s| s.tep == t.id()).cloned().collect();
        !subs.is_empty() && lengths_valid(&TepSuboption::plain(t.id()), &subs)
    };
    let Some(tep) = teps.iter().copied().find(usable) else {
        // ENO present but nothing in common: a vacuous option is allowed here (§4.6).
        return (SynOption::new(global, vec![]).encode().unwrap_or_default(), None);
    };
    if let Some(cache) = cache {
        let offers: Vec<_> = a.teps().filter(|s| s.tep == tep.id()).filter_map(|s| resume_fields(s).ok().flatten()).collect();
        if offers.len() == 1 {
            if let Some(ticket) = cache.take_by_peer_half(&offers[0].0, tep) {
                let mut nonce = vec![0u8; resume_nonce_len.min(MAX_RESUME_NONCE_LEN)];
                rng.fill_bytes(&mut nonce);
                let sub = ticket.suboption(&nonce);
                if let Ok(o) = SynOption::new(global, vec![sub]).encode() {
                    return (o, Some(ticket));
                }
            }
        }
    }
    (SynOption::new(global, vec![TepSuboption::plain(tep.id())]).encode().unwrap_or_default(), None)
}

/// How the negotiated session gets its keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyMode {
    /// Init1/Init2 key exchange (§3.3).
    Fresh,
    /// Resumption from the ticket with this resume[i] (§3.5); nonces of both sides.
    Resume { id: [u8; RESUME_ID_LEN], my_nonce: Vec<u8>, peer_nonce: Vec<u8> },
}

/// The outcome of a successful tcpcrypt negotiation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// TCP-ENO's result.
    pub eno: Negotiated,
    /// The negotiated tcpcrypt TEP.
    pub tep: Tep,
    /// Fresh or resumed.
    pub mode: KeyMode,
}

/// The rules of §3.5 a choice of B's suboption `b` must meet whatever tickets a host holds:
/// A's suboptions for its TEP (`a_subs`) carry at most 9 + 8 bytes of data each and offer
/// resumption (9 bytes or more) at most once; `b` carries at most 9 + 8 bytes; and if `b`
/// resumes, A offered resumption. (eno-bpf's sock_ops program applies the same rules when it
/// picks a TEP, so both agree on when ENO negotiated tcpcrypt: `fuzz_eno_diff`.)
pub fn lengths_valid(b: &TepSuboption, a_subs: &[TepSuboption]) -> bool {
    let mut offers = 0;
    for s in a_subs {
        match resume_fields(s) {
            Err(InvalidResume) => return false,
            Ok(Some(_)) => offers += 1,
            Ok(None) => {}
        }
    }
    match resume_fields(b) {
        Err(InvalidResume) => false,
        Ok(Some(_)) => offers == 1,
        Ok(None) => offers <= 1,
    }
}

fn tcpcrypt_valid(role: Role, b: &TepSuboption, a_subs: &[TepSuboption], tickets: &[&ResumeTicket]) -> Option<KeyMode> {
    let tep = Tep::from_id(b.tep)?;
    if !lengths_valid(b, a_subs) {
        return None;
    }
    // §3.5: at most one resumption suboption per TEP from A; a malformed one invalidates.
    let mut a_res = Vec::new();
    for s in a_subs {
        match resume_fields(s) {
            Err(InvalidResume) => return None,
            Ok(Some(r)) => a_res.push(r),
            Ok(None) => {}
        }
    }
    if a_res.len() > 1 {
        return None;
    }
    let b_res = resume_fields(b).ok()?;
    let Some((b_half, b_nonce)) = b_res else { return Some(KeyMode::Fresh) };
    // B proposes resumption: valid only if A offered it and the halves name a ticket we hold.
    let (a_half, a_nonce) = *a_res.first()?;
    let (my, peer) = match role {
        Role::A => ((a_half, a_nonce), (b_half, b_nonce)),
        Role::B => ((b_half, b_nonce), (a_half, a_nonce)),
    };
    let t = tickets.iter().find(|t| t.tep == tep && t.my_half() == my.0 && t.peer_half() == peer.0)?;
    Some(KeyMode::Resume { id: t.id, my_nonce: my.1.to_vec(), peer_nonce: peer.1.to_vec() })
}

/// Negotiate tcpcrypt for one side of an ordinary open from the recorded options. `tickets`
/// are the resumption tickets this side may use: for an active opener the one it offered,
/// for a passive opener the one [`synack_option`] returned.
pub fn negotiate(
    syn_option: &[u8],
    synack_option: &[u8],
    passive: bool,
    ack_had_eno: bool,
    teps: &[Tep],
    tickets: &[&ResumeTicket],
) -> Result<Plan, Fallback> {
    let policy = Policy { teps: teps.iter().map(|t| t.id()).collect(), mandatory_app_aware: false };
    // Our role by the b bit of our own option (§4.3); needed inside the validity check.
    let local = if passive { synack_option } else { syn_option };
    let role = match SynOption::parse(local) {
        Ok(o) if o.global().b() => Role::B,
        _ => Role::A,
    };
    let mut mode = KeyMode::Fresh;
    let eno = eno::negotiate_open(syn_option, synack_option, passive, ack_had_eno, &policy, |b, a| {
        match tcpcrypt_valid(role, b, a, tickets) {
            Some(m) => {
                mode = m;
                true
            }
            None => false,
        }
    })?;
    let tep = Tep::from_id(eno.tep()).ok_or(Fallback::NoCommonTep)?;
    Ok(Plan { eno, tep, mode })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 8548 §3.5: data of more than 9 + 8 bytes, or two resumption offers for one TEP,
    /// make the TEP unusable (the inputs on which fuzz_eno_diff found eno-bpf disagreeing).
    #[test]
    fn suboption_lengths() {
        let with = |n: usize| TepSuboption::with_data(0x23, vec![7; n]);
        let plain = TepSuboption::plain(0x23);
        assert!(lengths_valid(&plain, std::slice::from_ref(&plain)));
        assert!(lengths_valid(&plain, &[with(8)]), "under 9 bytes: a fresh key exchange");
        assert!(lengths_valid(&plain, &[with(17)]), "an offer B may decline");
        assert!(!lengths_valid(&plain, &[with(18)]));
        assert!(!lengths_valid(&plain, &[with(9), with(12)]), "two offers");
        assert!(lengths_valid(&with(9), &[with(17)]), "B resumes what A offered");
        assert!(!lengths_valid(&with(9), std::slice::from_ref(&plain)), "B resumes what A did not offer");
        assert!(!lengths_valid(&with(18), &[with(9)]));
        // A SYN offering 0x21 and 0x23 with 18 bytes: the SYN-ACK takes 0x21 (eno-bpf does too).
        let mut syn = vec![eno::KIND, 22, 0x21, 0xa3];
        syn.extend([0x11; 18]);
        let (synack, _) = synack_option(&syn, &[Tep::Curve25519, Tep::P256], None, 8, &mut rand_core::OsRng);
        assert_eq!(synack, [eno::KIND, 4, 0x01, 0x21]);
        // ... and a SYN-ACK naming 0x23 with 18 bytes negotiates nothing.
        let mut synack = vec![eno::KIND, 22, 0x01, 0xa3];
        synack.extend([0x11; 18]);
        let syn = [eno::KIND, 3, 0x23];
        assert_eq!(negotiate(&syn, &synack, false, true, &[Tep::Curve25519], &[]).err(), Some(Fallback::NoCommonTep));
    }
}
