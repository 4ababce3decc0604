//! Recording (`:startRecord`, `:stopRecord`, `:records`; DECISIONS section
//! 10): a stream's tracks into fragmented MP4 or MPEG-TS files, split by
//! interval or schedule, with OME's info XML and path macros.
//!
//! - [`request`]: body validation, the path rules, macros, schedules;
//! - [`task`]: the record table and states;
//! - [`mux`]: the bytes of a file;
//! - [`manager`]: the recordings of live streams, as file operations for
//!   the writer thread (`server/file_writer.rs`), which alone touches disk.

pub mod manager;
pub mod mux;
pub mod request;
pub mod task;
