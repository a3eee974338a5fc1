//! wearlab's tcpcrypt: TCP-ENO (RFC 8547) and tcpcrypt (RFC 8548) as a pure protocol
//! library, without I/O.
//!
//! * [`eno`]: the ENO option, TEP negotiation, fallback rules, transcript.
//! * [`resume`]: tcpcrypt's use of ENO: SYN/SYN-ACK options, negotiation with resumption.
//! * [`msgs`]: Init1, Init2, frames.
//! * [`keys`]: the HKDF-SHA256 key schedule.
//! * [`Session`]: the connection state machine.
//! * [`observe`]: a passive observer with the key log: decrypt a captured connection.
//!
//! ```
//! use tcpcrypt_proto::{resume, Config, Session};
//! let cfg = Config::default();
//! let mut rng = rand_core::OsRng;
//! // What the two SYNs carried (recorded by the kernel side).
//! let syn = resume::syn_option(&cfg.teps, None).unwrap();
//! let (synack, _) = resume::synack_option(&syn, &cfg.teps, None, 8, &mut rng);
//! let plan_a = resume::negotiate(&syn, &synack, false, true, &cfg.teps, &[]).unwrap();
//! let plan_b = resume::negotiate(&syn, &synack, true, true, &cfg.teps, &[]).unwrap();
//! let mut a = Session::new(&plan_a, cfg.clone(), None, &mut rng).unwrap();
//! let mut b = Session::new(&plan_b, cfg, None, &mut rng).unwrap();
//! a.send(b"hello").unwrap();
//! b.receive(&a.take_outgoing()).unwrap();  // Init1 -> B answers with Init2
//! a.receive(&b.take_outgoing()).unwrap();  // Init2 -> A sends its queued frame
//! b.receive(&a.take_outgoing()).unwrap();
//! assert_eq!(b.take_plaintext(), b"hello");
//! assert_eq!(a.session_id(), b.session_id());
//! ```
#![forbid(unsafe_code)]


pub mod consts;
pub mod eno;
mod error;
pub mod keys;
pub mod msgs;
pub mod observe;
pub mod resume;
pub mod successors;
mod session;
pub mod suite;

pub use eno::{Fallback, Role};
pub use error::Error;
pub use resume::{KeyMode, Plan, ResumeName, ResumeTicket};
pub use successors::{Acceptor, Proposer};
pub use session::{Config, Event, Session, Stats, DEFAULT_MAX_PENDING, DEFAULT_REKEY_AFTER_BYTES, MAX_FRAME_DATA};
pub use suite::{Aead, Tep};

/// Session ID as lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
