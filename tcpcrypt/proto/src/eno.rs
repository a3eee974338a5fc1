//! TCP-ENO (RFC 8547): the ENO option (SYN form and non-SYN form), TEP negotiation (§4.5),
//! the handshake's fallback rules (§4.6, incl. the `b`-bit role rules of §4.3) and the
//! negotiation transcript (§4.8).
//!
//! The parsers take the option exactly as it appears in the TCP header (kind and length
//! included) and never panic: every malformed input is an [`EnoError`].

use core::fmt;

/// TCP option kind of TCP-ENO (RFC 8547 §4.1, Figure 1).
pub const KIND: u8 = 69;
/// TCP option space is at most 40 bytes (RFC 8547 §4.4); an ENO option longer than that
/// could never be sent.
pub const MAX_OPTION_LEN: usize = 40;
/// The `v` bit of an initial suboption byte (Figure 4).
pub const V_BIT: u8 = 0x80;
/// Lowest TEP identifier (glt >= 0x20 are TEP identifiers, Table 1).
pub const MIN_TEP_ID: u8 = 0x20;
/// A length byte is `100nnnnn` (Figure 6): data length = nnnnn + 1, i.e. 1..=32.
pub const MAX_LENGTH_BYTE_DATA: usize = 32;

/// Why an ENO option could not be parsed or encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnoError {
    /// Fewer than 2 bytes, so no kind/length.
    TooShort,
    /// Kind byte is not 69.
    WrongKind(u8),
    /// The option's length byte disagrees with the bytes given.
    LengthMismatch { declared: u8, actual: usize },
    /// A length byte announces data past the end of the option (§4.4 rule 1).
    LengthBeyondEnd,
    /// A length byte is followed by an octet in 0x00-0x9f (§4.4 rule 2).
    LengthNotFollowedByTep(u8),
    /// Encoding: a suboption with data that is not last needs 1..=32 data bytes.
    DataNotEncodable(usize),
    /// Encoding: the option would exceed TCP's 40 bytes of option space.
    TooLong(usize),
    /// Encoding: a TEP identifier outside 0x20..=0x7f or a global suboption outside 0x00..=0x1f.
    BadIdentifier(u8),
}

impl fmt::Display for EnoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EnoError::TooShort => write!(f, "ENO option shorter than 2 bytes"),
            EnoError::WrongKind(k) => write!(f, "option kind {k} is not ENO (69)"),
            EnoError::LengthMismatch { declared, actual } => {
                write!(f, "ENO option length byte {declared} but {actual} bytes")
            }
            EnoError::LengthBeyondEnd => write!(f, "ENO length byte points past the option's end"),
            EnoError::LengthNotFollowedByTep(b) => {
                write!(f, "ENO length byte followed by {b:#04x}, not a TEP with v=1")
            }
            EnoError::DataNotEncodable(n) => {
                write!(f, "suboption data of {n} bytes cannot be encoded before another suboption")
            }
            EnoError::TooLong(n) => write!(f, "ENO option of {n} bytes exceeds TCP option space"),
            EnoError::BadIdentifier(b) => write!(f, "invalid suboption identifier {b:#04x}"),
        }
    }
}

impl std::error::Error for EnoError {}

/// The global suboption byte (§4.2, Figure 5): `0 0 0 z1 z2 z3 a b`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Global(pub u8);

impl Global {
    /// The passive role bit.
    pub const B: u8 = 0x01;
    /// The application-aware bit.
    pub const A: u8 = 0x02;

    /// A global suboption with the given `a` and `b` bits and all `z` bits zero.
    pub fn new(a: bool, b: bool) -> Global {
        Global(if a { Self::A } else { 0 } | if b { Self::B } else { 0 })
    }
    /// Passive role bit `b`.
    pub fn b(self) -> bool {
        self.0 & Self::B != 0
    }
    /// Application-aware bit `a`.
    pub fn a(self) -> bool {
        self.0 & Self::A != 0
    }
}

/// A TEP suboption: identifier, `v` bit and suboption data (§4.1, §4.4).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TepSuboption {
    /// The 7-bit TEP identifier (0x20..=0x7f).
    pub tep: u8,
    /// The `v` bit as sent (a TEP with v = 1 may still carry zero bytes of data when last).
    pub v: bool,
    /// Suboption data (empty when v = 0).
    pub data: Vec<u8>,
}

impl TepSuboption {
    /// A one-byte suboption (v = 0).
    pub fn plain(tep: u8) -> Self {
        TepSuboption { tep, v: false, data: Vec::new() }
    }
    /// A suboption with v = 1 and the given data.
    pub fn with_data(tep: u8, data: Vec<u8>) -> Self {
        TepSuboption { tep, v: true, data }
    }
    /// The initial suboption byte: TEP identifier with the `v` bit. This is the byte a
    /// session ID starts with (RFC 8547 §5.1).
    pub fn byte(&self) -> u8 {
        (self.tep & 0x7f) | if self.v { V_BIT } else { 0 }
    }
}

/// One suboption of a SYN-form ENO option, in wire order.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Suboption {
    /// A global suboption (glt < 0x20, v = 0).
    Global(Global),
    /// A TEP identifier with or without data.
    Tep(TepSuboption),
}

/// A SYN-form ENO option (Figure 2): zero or more suboptions.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct SynOption {
    /// Suboptions in the order they appear.
    pub suboptions: Vec<Suboption>,
}

fn option_contents(option: &[u8]) -> Result<&[u8], EnoError> {
    if option.len() < 2 {
        return Err(EnoError::TooShort);
    }
    if option[0] != KIND {
        return Err(EnoError::WrongKind(option[0]));
    }
    if usize::from(option[1]) != option.len() {
        return Err(EnoError::LengthMismatch { declared: option[1], actual: option.len() });
    }
    Ok(&option[2..])
}

impl SynOption {
    /// Build a SYN-form option from a global suboption (if any) and TEP suboptions.
    pub fn new(global: Option<Global>, teps: Vec<TepSuboption>) -> Self {
        let mut suboptions = Vec::with_capacity(teps.len() + 1);
        if let Some(g) = global {
            suboptions.push(Suboption::Global(g));
        }
        suboptions.extend(teps.into_iter().map(Suboption::Tep));
        SynOption { suboptions }
    }

    /// Parse an ENO option including its kind and length bytes.
    pub fn parse(option: &[u8]) -> Result<Self, EnoError> {
        Self::parse_contents(option_contents(option)?)
    }

    /// Parse the contents (the bytes after kind and length) of a SYN-form option.
    pub fn parse_contents(contents: &[u8]) -> Result<Self, EnoError> {
        let mut suboptions = Vec::new();
        let mut i = 0usize;
        while let Some(&byte) = contents.get(i) {
            let v = byte & V_BIT != 0;
            let glt = byte & 0x7f;
            match (v, glt >= MIN_TEP_ID) {
                // Global suboption.
                (false, false) => {
                    suboptions.push(Suboption::Global(Global(byte)));
                    i += 1;
                }
                // TEP without data.
                (false, true) => {
                    suboptions.push(Suboption::Tep(TepSuboption::plain(glt)));
                    i += 1;
                }
                // Length byte: 100nnnnn, then a TEP with v = 1, then nnnnn+1 data bytes.
                (true, false) => {
                    let len = usize::from(byte & 0x1f) + 1;
                    let tep_byte = *contents.get(i + 1).ok_or(EnoError::LengthBeyondEnd)?;
                    if tep_byte < (V_BIT | MIN_TEP_ID) {
                        return Err(EnoError::LengthNotFollowedByTep(tep_byte));
                    }
                    let start = i + 2;
                    let end = start.checked_add(len).ok_or(EnoError::LengthBeyondEnd)?;
                    let data = contents.get(start..end).ok_or(EnoError::LengthBeyondEnd)?;
                    suboptions
                        .push(Suboption::Tep(TepSuboption::with_data(tep_byte & 0x7f, data.to_vec())));
                    i = end;
                }
                // TEP with data extending to the end of the option.
                (true, true) => {
                    let data = contents.get(i + 1..).unwrap_or_default();
                    suboptions.push(Suboption::Tep(TepSuboption::with_data(glt, data.to_vec())));
                    i = contents.len();
                }
            }
        }
        Ok(SynOption { suboptions })
    }

    /// Encode as a complete TCP option (kind, length, contents). A suboption with data that
    /// is not last gets a length byte; the last one's length is implied (§4.4).
    pub fn encode(&self) -> Result<Vec<u8>, EnoError> {
        let mut out = vec![KIND, 0];
        let n = self.suboptions.len();
        for (idx, sub) in self.suboptions.iter().enumerate() {
            match sub {
                Suboption::Global(g) => {
                    if g.0 >= MIN_TEP_ID {
                        return Err(EnoError::BadIdentifier(g.0));
                    }
                    out.push(g.0);
                }
                Suboption::Tep(t) => {
                    if !(MIN_TEP_ID..=0x7f).contains(&t.tep) {
                        return Err(EnoError::BadIdentifier(t.tep));
                    }
                    if !t.v {
                        if !t.data.is_empty() {
                            return Err(EnoError::DataNotEncodable(t.data.len()));
                        }
                        out.push(t.tep);
                    } else if idx + 1 == n {
                        out.push(t.byte());
                        out.extend_from_slice(&t.data);
                    } else {
                        if t.data.is_empty() || t.data.len() > MAX_LENGTH_BYTE_DATA {
                            return Err(EnoError::DataNotEncodable(t.data.len()));
                        }
                        // Length fits in 5 bits: checked just above.
                        out.push(V_BIT | ((t.data.len() - 1) as u8));
                        out.push(t.byte());
                        out.extend_from_slice(&t.data);
                    }
                }
            }
        }
        if out.len() > MAX_OPTION_LEN {
            return Err(EnoError::TooLong(out.len()));
        }
        out[1] = out.len() as u8;
        Ok(out)
    }

    /// The global suboption that counts: the first one, or the implicit 0x00 (§4.2).
    pub fn global(&self) -> Global {
        self.suboptions
            .iter()
            .find_map(|s| match s {
                Suboption::Global(g) => Some(*g),
                Suboption::Tep(_) => None,
            })
            .unwrap_or_default()
    }

    /// TEP suboptions in wire order.
    pub fn teps(&self) -> impl DoubleEndedIterator<Item = &TepSuboption> + '_ {
        self.suboptions.iter().filter_map(|s| match s {
            Suboption::Tep(t) => Some(t),
            Suboption::Global(_) => None,
        })
    }

    /// A vacuous option has no TEP suboption (§4.6).
    pub fn is_vacuous(&self) -> bool {
        self.teps().next().is_none()
    }
}

/// A non-SYN-form ENO option (Figure 3): its presence is a one-bit acknowledgment; tcpcrypt
/// assigns no meaning to its contents, so we send it empty and ignore contents on receipt.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NonSynOption {
    /// Contents, ignored by TCP-ENO.
    pub contents: Vec<u8>,
}

impl NonSynOption {
    /// Parse a non-SYN-form option including kind and length.
    pub fn parse(option: &[u8]) -> Result<Self, EnoError> {
        Ok(NonSynOption { contents: option_contents(option)?.to_vec() })
    }
    /// Encode including kind and length.
    pub fn encode(&self) -> Result<Vec<u8>, EnoError> {
        let len = self.contents.len() + 2;
        if len > MAX_OPTION_LEN {
            return Err(EnoError::TooLong(len));
        }
        let mut out = vec![KIND, len as u8];
        out.extend_from_slice(&self.contents);
        Ok(out)
    }
}

/// TCP-ENO role (§4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// The host that sent b = 0 (normally the active opener).
    A,
    /// The host that sent b = 1 (normally the passive opener).
    B,
}

impl Role {
    /// The other role.
    pub fn peer(self) -> Role {
        match self {
            Role::A => Role::B,
            Role::B => Role::A,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::A => "A",
            Role::B => "B",
        })
    }
}

/// Why TCP-ENO fell back to unencrypted TCP (§4.6). None of these is an error of the
/// connection: the daemon then relays plain TCP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fallback {
    /// We sent no ENO option (ENO disabled locally).
    NoLocalOption,
    /// The peer's SYN had no ENO option.
    NoRemoteOption,
    /// Our own option does not parse (a local bug or misconfiguration).
    LocalMalformed(EnoError),
    /// The peer's SYN-form option is ill-formed (§4.6 rule 1).
    RemoteMalformed(EnoError),
    /// Both hosts set the same `b` bit (§4.3, §4.6 rule 3).
    SameRole,
    /// Mandatory application-aware mode and the peer set a = 0 (§4.6 rule 3).
    PeerNotApplicationAware,
    /// No valid TEP in B's option that A also offered and we support (§4.5, §4.6 rule 2).
    NoCommonTep,
    /// We are host B (passive) and the peer's ACK carried no ENO option (§4.6 rule 1).
    NoEnoInAck,
}

impl fmt::Display for Fallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fallback::NoLocalOption => write!(f, "no local ENO option"),
            Fallback::NoRemoteOption => write!(f, "peer sent no ENO option"),
            Fallback::LocalMalformed(e) => write!(f, "local ENO option malformed: {e}"),
            Fallback::RemoteMalformed(e) => write!(f, "peer ENO option malformed: {e}"),
            Fallback::SameRole => write!(f, "both hosts set the same b bit"),
            Fallback::PeerNotApplicationAware => write!(f, "peer not application-aware (a=0)"),
            Fallback::NoCommonTep => write!(f, "no valid common TEP"),
            Fallback::NoEnoInAck => write!(f, "ACK carried no ENO option"),
        }
    }
}

/// Local negotiation policy.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// TEP identifiers this host supports (any order; priority is B's, §4.5).
    pub teps: Vec<u8>,
    /// Mandatory application-aware mode (§4.2 `a`): fall back unless the peer set a = 1.
    pub mandatory_app_aware: bool,
}

/// A successful TCP-ENO negotiation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    /// Our role.
    pub role: Role,
    /// The negotiated TEP suboption as host B sent it (its byte starts the session ID).
    pub b_suboption: TepSuboption,
    /// Host A's suboptions for the negotiated TEP (usually exactly one).
    pub a_suboptions: Vec<TepSuboption>,
    /// The negotiation transcript (§4.8): A's option then B's option, kind and length
    /// included, exactly as they appeared.
    pub transcript: Vec<u8>,
    /// The peer's `a` bit.
    pub peer_app_aware: bool,
}

impl Negotiated {
    /// The negotiated TEP identifier.
    pub fn tep(&self) -> u8 {
        self.b_suboption.tep
    }
    /// The byte that starts the session ID: TEP identifier with B's `v` bit (§5.1).
    pub fn tep_byte(&self) -> u8 {
        self.b_suboption.byte()
    }
    /// Our own suboption for the negotiated TEP (for B the negotiated one; for A the last
    /// of its suboptions with that identifier).
    pub fn local_suboption(&self) -> Option<&TepSuboption> {
        match self.role {
            Role::B => Some(&self.b_suboption),
            Role::A => self.a_suboptions.last(),
        }
    }
}

/// The negotiation transcript of §4.8.
pub fn transcript(a_option: &[u8], b_option: &[u8]) -> Vec<u8> {
    let mut t = Vec::with_capacity(a_option.len() + b_option.len());
    t.extend_from_slice(a_option);
    t.extend_from_slice(b_option);
    t
}

/// Negotiate from the SYN-form option this host sent and the one it received (either may be
/// empty = absent). `valid(b_sub, a_subs)` is the TEP's validity check (§4.5 items 2 and 3):
/// it sees B's candidate suboption and all of A's suboptions with the same identifier.
/// The negotiated TEP is the last valid TEP identifier in B's option that A also offered and
/// that `policy` supports.
pub fn negotiate(
    local: &[u8],
    remote: &[u8],
    policy: &Policy,
    mut valid: impl FnMut(&TepSuboption, &[TepSuboption]) -> bool,
) -> Result<Negotiated, Fallback> {
    if local.is_empty() {
        return Err(Fallback::NoLocalOption);
    }
    if remote.is_empty() {
        return Err(Fallback::NoRemoteOption);
    }
    let l = SynOption::parse(local).map_err(Fallback::LocalMalformed)?;
    let r = SynOption::parse(remote).map_err(Fallback::RemoteMalformed)?;
    let (lg, rg) = (l.global(), r.global());
    if lg.b() == rg.b() {
        return Err(Fallback::SameRole);
    }
    if policy.mandatory_app_aware && !rg.a() {
        return Err(Fallback::PeerNotApplicationAware);
    }
    let role = if lg.b() { Role::B } else { Role::A };
    let (a_opt, b_opt, a_bytes, b_bytes) = match role {
        Role::A => (&l, &r, local, remote),
        Role::B => (&r, &l, remote, local),
    };
    for cand in b_opt.teps().rev() {
        if !policy.teps.contains(&cand.tep) {
            continue;
        }
        let a_subs: Vec<TepSuboption> = a_opt.teps().filter(|t| t.tep == cand.tep).cloned().collect();
        if a_subs.is_empty() || !valid(cand, &a_subs) {
            continue;
        }
        return Ok(Negotiated {
            role,
            b_suboption: cand.clone(),
            a_suboptions: a_subs,
            transcript: transcript(a_bytes, b_bytes),
            peer_app_aware: rg.a(),
        });
    }
    Err(Fallback::NoCommonTep)
}

/// Negotiate for one side of an ordinary (non-simultaneous) open, from what the BPF side
/// records: the active opener's SYN option, the passive opener's SYN-ACK option (empty if
/// none), our side, and (for the passive side) whether the third segment carried ENO.
pub fn negotiate_open(
    syn_option: &[u8],
    synack_option: &[u8],
    passive: bool,
    ack_had_eno: bool,
    policy: &Policy,
    valid: impl FnMut(&TepSuboption, &[TepSuboption]) -> bool,
) -> Result<Negotiated, Fallback> {
    let (local, remote) = if passive { (synack_option, syn_option) } else { (syn_option, synack_option) };
    if passive && !local.is_empty() && !remote.is_empty() && !ack_had_eno {
        return Err(Fallback::NoEnoInAck);
    }
    negotiate(local, remote, policy, valid)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn any(_: &TepSuboption, _: &[TepSuboption]) -> bool {
        true
    }

    #[test]
    fn figure9_example() {
        // A -> B: SYN ENO<X,Y>; B -> A: SYN-ACK ENO<b=1,Y>
        let a = SynOption::new(None, vec![TepSuboption::plain(0x21), TepSuboption::plain(0x23)]);
        let a = a.encode().unwrap();
        assert_eq!(a, vec![69, 4, 0x21, 0x23]);
        let b = SynOption::new(Some(Global::new(false, true)), vec![TepSuboption::plain(0x23)]).encode().unwrap();
        assert_eq!(b, vec![69, 4, 0x01, 0x23]);
        let pol = Policy { teps: vec![0x21, 0x23], ..Default::default() };
        let na = negotiate(&a, &b, &pol, any).unwrap();
        let nb = negotiate(&b, &a, &pol, any).unwrap();
        assert_eq!(na.role, Role::A);
        assert_eq!(nb.role, Role::B);
        assert_eq!(na.tep(), 0x23);
        assert_eq!(na.transcript, nb.transcript);
        assert_eq!(na.transcript, vec![69, 4, 0x21, 0x23, 69, 4, 0x01, 0x23]);
    }

    #[test]
    fn last_valid_in_b_wins_figure12() {
        // Simultaneous open: A ENO<Y,X>, B ENO<b=1,X,Y,Z>: Y negotiated (Z not offered by A).
        let (x, y, z) = (0x21, 0x23, 0x24);
        let a = SynOption::new(None, vec![TepSuboption::plain(y), TepSuboption::plain(x)]).encode().unwrap();
        let b = SynOption::new(
            Some(Global::new(false, true)),
            vec![TepSuboption::plain(x), TepSuboption::plain(y), TepSuboption::plain(z)],
        )
        .encode()
        .unwrap();
        let pol = Policy { teps: vec![x, y, z], ..Default::default() };
        assert_eq!(negotiate(&a, &b, &pol, any).unwrap().tep(), y);
        // An invalid Y (by the TEP's rule) leaves X.
        assert_eq!(negotiate(&a, &b, &pol, |b, _| b.tep != y).unwrap().tep(), x);
    }

    #[test]
    fn role_rules() {
        let pol = Policy { teps: vec![0x23], ..Default::default() };
        let a0 = vec![69, 3, 0x23];
        let b1 = vec![69, 4, 0x01, 0x23];
        // Echoed option (both b = 0): fails.
        assert_eq!(negotiate(&a0, &a0, &pol, any), Err(Fallback::SameRole));
        // Both b = 1: fails.
        assert_eq!(negotiate(&b1, &b1, &pol, any), Err(Fallback::SameRole));
        // Absent options.
        assert_eq!(negotiate(&a0, &[], &pol, any), Err(Fallback::NoRemoteOption));
        assert_eq!(negotiate(&[], &b1, &pol, any), Err(Fallback::NoLocalOption));
        // Vacuous.
        assert_eq!(negotiate(&a0, &[69, 3, 0x01], &pol, any), Err(Fallback::NoCommonTep));
        // Mandatory application-aware.
        let strict = Policy { teps: vec![0x23], mandatory_app_aware: true };
        assert_eq!(negotiate(&a0, &b1, &strict, any), Err(Fallback::PeerNotApplicationAware));
        assert!(negotiate(&a0, &[69, 4, 0x03, 0x23], &strict, any).is_ok());
        // Only the first global suboption counts.
        assert_eq!(SynOption::parse(&[69, 5, 0x01, 0x00, 0x23]).unwrap().global(), Global(1));
        // Passive side without ENO in the ACK.
        assert_eq!(negotiate_open(&a0, &b1, true, false, &pol, any), Err(Fallback::NoEnoInAck));
        assert_eq!(negotiate_open(&a0, &b1, true, true, &pol, any).unwrap().role, Role::B);
        assert_eq!(negotiate_open(&a0, &b1, false, false, &pol, any).unwrap().role, Role::A);
    }

    #[test]
    fn length_byte_rules() {
        // Length byte (2 bytes data) + TEP 0x23 v=1, then TEP 0x21.
        let o = [69, 7, 0x81, 0xa3, 0xaa, 0xbb, 0x21];
        let p = SynOption::parse(&o).unwrap();
        assert_eq!(
            p.suboptions,
            vec![
                Suboption::Tep(TepSuboption::with_data(0x23, vec![0xaa, 0xbb])),
                Suboption::Tep(TepSuboption::plain(0x21))
            ]
        );
        assert_eq!(p.encode().unwrap(), o);
        // §4.4 rule 1: extends beyond the end.
        assert_eq!(SynOption::parse(&[69, 5, 0x82, 0xa3, 0xaa]), Err(EnoError::LengthBeyondEnd));
        assert_eq!(SynOption::parse(&[69, 3, 0x80]), Err(EnoError::LengthBeyondEnd));
        // §4.4 rule 2: followed by 0x00-0x9f.
        assert_eq!(SynOption::parse(&[69, 5, 0x80, 0x23, 0x00]), Err(EnoError::LengthNotFollowedByTep(0x23)));
        assert_eq!(SynOption::parse(&[69, 5, 0x80, 0x9f, 0x00]), Err(EnoError::LengthNotFollowedByTep(0x9f)));
        // Last suboption with data: extends to the end, may be empty.
        let p = SynOption::parse(&[69, 3, 0xa3]).unwrap();
        assert_eq!(p.suboptions, vec![Suboption::Tep(TepSuboption::with_data(0x23, vec![]))]);
        // Length byte with 32 data bytes.
        let mut o = vec![69, 0, 0x9f, 0xa3];
        o.extend([7u8; 32]);
        o.push(0x21);
        o[1] = o.len() as u8;
        assert_eq!(SynOption::parse(&o).unwrap().encode().unwrap(), o);
        // Encoder limits.
        let long = SynOption::new(None, vec![TepSuboption::with_data(0x23, vec![0; 33]), TepSuboption::plain(0x21)]);
        assert_eq!(long.encode(), Err(EnoError::DataNotEncodable(33)));
        let toolong = SynOption::new(None, vec![TepSuboption::with_data(0x23, vec![0; 39])]);
        assert_eq!(toolong.encode(), Err(EnoError::TooLong(42)));
    }

    #[test]
    fn framing_errors() {
        assert_eq!(SynOption::parse(&[]), Err(EnoError::TooShort));
        assert_eq!(SynOption::parse(&[68, 2]), Err(EnoError::WrongKind(68)));
        assert_eq!(SynOption::parse(&[69, 3]), Err(EnoError::LengthMismatch { declared: 3, actual: 2 }));
        assert_eq!(NonSynOption::parse(&[69, 2]).unwrap().encode().unwrap(), vec![69, 2]);
        assert_eq!(NonSynOption::parse(&[69, 3, 9]).unwrap().contents, vec![9]);
    }
}
