//! The state file: everything made through the API, so it survives a
//! restart (DECISIONS section 6). Written crash-safely before the API call
//! is answered: a temporary file beside it, fsync, rename over the old one,
//! fsync the directory. A file that does not parse stops start-up and is
//! never overwritten.

use super::vhost::VhostSpec;
use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

pub const FORMAT: u32 = 1;

/// What the state file holds.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DurableState {
    pub format: u32,
    /// API-made virtual hosts in creation order.
    #[serde(default)]
    pub vhosts: Vec<VhostSpec>,
    /// Push tasks in creation order (counters and states are not kept).
    #[serde(default)]
    pub pushes: Vec<super::push::PushSpec>,
}

#[derive(Debug)]
pub enum StateError {
    Read(PathBuf, io::Error),
    Parse(PathBuf, serde_json::Error),
    Format(PathBuf, u32),
}

impl std::fmt::Display for StateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StateError::Read(p, e) => write!(f, "cannot read the state file {}: {e}", p.display()),
            StateError::Parse(p, e) => write!(
                f,
                "the state file {} is corrupt ({e}); kiln will not start over it. Fix or move the file; it has not been changed",
                p.display()
            ),
            StateError::Format(p, v) => write!(
                f,
                "the state file {} has format {v}; this kiln reads format {FORMAT}. It has not been changed",
                p.display()
            ),
        }
    }
}

impl std::error::Error for StateError {}

#[derive(Debug, Clone)]
pub struct StateStore {
    path: PathBuf,
    tmp: PathBuf,
    /// Kept in memory only (fuzzing and in-process tests): nothing is
    /// written.
    memory: bool,
}

impl StateStore {
    pub fn new(path: PathBuf) -> Self {
        let mut tmp = path.clone().into_os_string();
        tmp.push(".tmp");
        StateStore {
            path,
            tmp: PathBuf::from(tmp),
            memory: false,
        }
    }

    /// A store that writes nothing (fuzzing and in-process tests).
    pub fn in_memory() -> Self {
        StateStore {
            path: PathBuf::from("(memory)"),
            tmp: PathBuf::from("(memory)"),
            memory: true,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The saved state; `None` when there is no file yet.
    pub fn load(&self) -> Result<Option<DurableState>, StateError> {
        if self.memory {
            return Ok(None);
        }
        let data = match fs::read(&self.path) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StateError::Read(self.path.clone(), e)),
        };
        let state: DurableState =
            serde_json::from_slice(&data).map_err(|e| StateError::Parse(self.path.clone(), e))?;
        if state.format != FORMAT {
            return Err(StateError::Format(self.path.clone(), state.format));
        }
        Ok(Some(state))
    }

    /// Writes `state` so that after a crash at any moment the file holds
    /// either the old or the new state, whole.
    pub fn save(&self, state: &DurableState) -> io::Result<()> {
        if self.memory {
            return Ok(());
        }
        let data = serde_json::to_vec_pretty(state).map_err(io::Error::other)?;
        {
            let mut f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&self.tmp)?;
            f.write_all(&data)?;
            f.write_all(b"\n")?;
            f.sync_all()?;
        }
        fs::rename(&self.tmp, &self.path)?;
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        File::open(dir)?.sync_all()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("kiln-store-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn save_then_load() {
        let d = temp_dir("roundtrip");
        let store = StateStore::new(d.join("state.json"));
        assert_eq!(store.load().unwrap(), None);
        let spec: VhostSpec =
            serde_json::from_str(r#"{"name":"a","host":{"names":["*"]}}"#).unwrap();
        let state = DurableState {
            format: FORMAT,
            vhosts: vec![spec],
            pushes: Vec::new(),
        };
        store.save(&state).unwrap();
        assert_eq!(store.load().unwrap(), Some(state));
        assert!(!d.join("state.json.tmp").exists());
    }

    #[test]
    fn corrupt_file_is_an_error_and_untouched() {
        let d = temp_dir("corrupt");
        let p = d.join("state.json");
        fs::write(&p, b"{not json").unwrap();
        let err = StateStore::new(p.clone()).load().unwrap_err().to_string();
        assert!(err.contains("corrupt"), "{err}");
        assert_eq!(fs::read(&p).unwrap(), b"{not json");
    }
}
