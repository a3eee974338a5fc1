//! Constants of RFC 8548 §4.3 (Table 1) and §5.

/// CONST_NEXTK (Table 1).
pub const CONST_NEXTK: u8 = 0x01;
/// CONST_SESSID (Table 1).
pub const CONST_SESSID: u8 = 0x02;
/// CONST_REKEY (Table 1).
pub const CONST_REKEY: u8 = 0x03;
/// CONST_KEY_A (Table 1).
pub const CONST_KEY_A: u8 = 0x04;
/// CONST_KEY_B (Table 1).
pub const CONST_KEY_B: u8 = 0x05;
/// CONST_RESUME (Table 1).
pub const CONST_RESUME: u8 = 0x06;
/// INIT1_MAGIC (Table 1).
pub const INIT1_MAGIC: u32 = 0x1510_1a0e;
/// INIT2_MAGIC (Table 1).
pub const INIT2_MAGIC: u32 = 0x0971_05e0;
/// N_A_LEN (§5).
pub const N_A_LEN: usize = 32;
/// N_B_LEN (§5).
pub const N_B_LEN: usize = 32;
/// K_LEN (§5).
pub const K_LEN: usize = 32;
/// Length of resume[i] (§3.5).
pub const RESUME_ID_LEN: usize = 18;
/// Each host sends half of resume[i] (§3.5, Figures 2 and 3).
pub const RESUME_HALF_LEN: usize = 9;
/// A resumption nonce is 0..=8 bytes (§3.5).
pub const MAX_RESUME_NONCE_LEN: usize = 8;
/// Frame header: control (1) + clen (2) (§4.2).
pub const FRAME_HEADER_LEN: usize = 3;
/// Largest ciphertext: clen is 16 bits and must be less than 2^16 (§3.6).
pub const MAX_CLEN: usize = 0xffff;
/// This implementation's bound on an Init1/Init2 message_len (the RFC allows trailing
/// ignored bytes; a 4-byte length would otherwise let a peer make us buffer 4 GiB).
pub const MAX_INIT_LEN: usize = 65536;
