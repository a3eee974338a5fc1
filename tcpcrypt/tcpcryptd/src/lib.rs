//! tcpcryptd: a transparent proxy that runs tcpcrypt (RFC 8548) on connections whose TCP-ENO
//! negotiation (RFC 8547, done in the kernel by the eno-bpf sock_ops program) chose a
//! tcpcrypt TEP, and relays plain TCP otherwise. See tcpcrypt/README.md for the design.

#![forbid(unsafe_code)]

pub mod bpf;
pub mod capture;
pub mod control;
pub mod device;
pub mod eno_source;
pub mod iptables;
pub mod proxy;
pub mod registry;

pub use eno_source::{EnoLookup, EnoRecord, EnoSource, FakeEno, FakeEnoNet, ListenerPolicy, NoEno};
pub use proxy::{DropEnoRecord, RequirePolicy};
pub use proxy::{Daemon, DaemonConfig, Destination};
pub use registry::Registry;
