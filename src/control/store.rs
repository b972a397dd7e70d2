//! What must survive a restart: the last confirmed main config file, while a confirm is
//! pending its deadline, and the last good configuration (every file of the last config
//! that came into force, what a start on an invalid config runs instead). All live in the
//! state directory; every write is atomic (a
//! temporary file in the same directory, fsynced, renamed over the old one, then the
//! directory fsynced), so a power cut leaves the old or the new file, never half of one.
//!
//! The same atomic write puts a new main config file in place (and the confirmed one back).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::instance::fnv1a64;

/// The confirmed copy's file name in the state directory.
const CONFIRMED: &str = "confirmed.toml";
/// The pending marker's file name in the state directory.
const PENDING: &str = "pending.json";
/// The last good configuration's file name in the state directory.
const LAST_GOOD: &str = "last-good.json";

/// The last configuration that came into force, as written to disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastGoodRecord {
    /// The main config file it was loaded for (canonical path): a daemon on another main
    /// file does not run it.
    pub main: String,
    /// Unix time (seconds) it was kept.
    pub saved_unix: u64,
    /// Every file of it, (path, text), the main file first, then `conf.d` in name order.
    pub files: Vec<(String, String)>,
    /// The data files they name (`loadfile`), (path, text); empty in a record an older
    /// edgenetd wrote.
    pub data: Vec<(String, String)>,
}

/// A confirm that is pending, as written to disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingRecord {
    /// Unix time (seconds) of the deadline.
    pub deadline_unix: u64,
    /// The file the applied configuration came from (for the log).
    pub applied_from: String,
    /// The main config file apply replaced (canonical path): the only file a rollback of
    /// this record may write. `None` in a record an older edgenetd wrote.
    pub main: Option<String>,
    /// [`fingerprint`] of what apply put in `main`: a file that holds anything else was
    /// changed since, and a rollback keeps that content beside it.
    pub applied: Option<String>,
}

/// A stable digest of a file's content (what a pending record says apply wrote).
pub fn fingerprint(bytes: &[u8]) -> String {
    format!("fnv1a64:{:016x}", fnv1a64(bytes))
}

/// The state directory.
#[derive(Debug, Clone)]
pub struct Store {
    /// Where the files live.
    dir: PathBuf,
}

impl Store {
    /// The store in `dir` (created by systemd's `StateDirectory=`, or by the first write).
    pub fn new(dir: impl Into<PathBuf>) -> Store {
        Store { dir: dir.into() }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The pending marker's path.
    pub fn pending_path(&self) -> PathBuf {
        self.dir.join(PENDING)
    }

    /// The confirmed copy's path.
    pub fn confirmed_path(&self) -> PathBuf {
        self.dir.join(CONFIRMED)
    }

    /// Replaces the confirmed copy.
    pub fn save_confirmed(&self, text: &[u8]) -> io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        write_atomically(&self.confirmed_path(), text, 0o600)
    }

    /// The confirmed copy.
    pub fn read_confirmed(&self) -> io::Result<Vec<u8>> {
        fs::read(self.confirmed_path())
    }

    /// Records a pending confirm.
    pub fn save_pending(&self, record: &PendingRecord) -> io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        let json = json!({
            "deadline_unix": record.deadline_unix,
            "applied_from": record.applied_from,
            "main": record.main,
            "applied": record.applied,
        })
        .to_string();
        write_atomically(&self.pending_path(), json.as_bytes(), 0o600)
    }

    /// The pending confirm, if one is recorded. A marker that cannot be parsed still says
    /// "pending": `Ok(Some(Err(why)))`.
    pub fn read_pending(&self) -> io::Result<Option<Result<PendingRecord, String>>> {
        match fs::read(self.pending_path()) {
            Ok(bytes) => Ok(Some(parse_pending(&bytes))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The last good configuration's path.
    pub fn last_good_path(&self) -> PathBuf {
        self.dir.join(LAST_GOOD)
    }

    /// Replaces the last good configuration: `files` (path, text) and the `data` files they
    /// name, kept for `main` at `saved_unix`. Streamed to the file: a config of 100,000 routes
    /// is not copied again.
    pub fn save_last_good(
        &self,
        main: &str,
        saved_unix: u64,
        files: &[(&str, &str)],
        data: &[(&str, &str)],
    ) -> io::Result<()> {
        #[derive(serde::Serialize)]
        struct File<'a> {
            path: &'a str,
            text: &'a str,
        }
        #[derive(serde::Serialize)]
        struct Record<'a> {
            main: &'a str,
            saved_unix: u64,
            files: Vec<File<'a>>,
            data: Vec<File<'a>>,
        }
        fs::create_dir_all(&self.dir)?;
        let record = Record {
            main,
            saved_unix,
            files: files
                .iter()
                .map(|&(path, text)| File { path, text })
                .collect(),
            data: data
                .iter()
                .map(|&(path, text)| File { path, text })
                .collect(),
        };
        write_atomically_with(&self.last_good_path(), 0o600, |out| {
            let mut out = io::BufWriter::new(out);
            serde_json::to_writer(&mut out, &record)?;
            out.flush()
        })
    }

    /// The last good configuration, if one is kept; `Ok(Some(Err(why)))` when it cannot be
    /// parsed.
    pub fn read_last_good(&self) -> io::Result<Option<Result<LastGoodRecord, String>>> {
        match fs::read(self.last_good_path()) {
            Ok(bytes) => Ok(Some(parse_last_good(&bytes))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Forgets the pending confirm (durably).
    pub fn clear_pending(&self) -> io::Result<()> {
        match fs::remove_file(self.pending_path()) {
            Ok(()) => sync_dir(&self.dir),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }
}

fn parse_pending(bytes: &[u8]) -> Result<PendingRecord, String> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    Ok(PendingRecord {
        deadline_unix: value["deadline_unix"]
            .as_u64()
            .ok_or("no `deadline_unix`")?,
        applied_from: value["applied_from"]
            .as_str()
            .ok_or("no `applied_from`")?
            .to_string(),
        main: value["main"].as_str().map(str::to_string),
        applied: value["applied"].as_str().map(str::to_string),
    })
}

fn parse_last_good(bytes: &[u8]) -> Result<LastGoodRecord, String> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    fn texts(list: &[Value]) -> Result<Vec<(String, String)>, String> {
        list.iter()
            .map(|f| match (f["path"].as_str(), f["text"].as_str()) {
                (Some(path), Some(text)) => Ok((path.to_string(), text.to_string())),
                _ => Err("a file without `path` or `text`".to_string()),
            })
            .collect()
    }
    let files = texts(value["files"].as_array().ok_or("no `files`")?)?;
    if files.is_empty() {
        return Err("no files".into());
    }
    // Absent in a record from before `loadfile`: no data files.
    let data = match &value["data"] {
        Value::Null => Vec::new(),
        v => texts(v.as_array().ok_or("`data` is not a list")?)?,
    };
    Ok(LastGoodRecord {
        main: value["main"].as_str().ok_or("no `main`")?.to_string(),
        saved_unix: value["saved_unix"].as_u64().ok_or("no `saved_unix`")?,
        files,
        data,
    })
}

/// Keeps `bytes`, the content of `main` that a rollback is about to replace, beside it as
/// `MAIN.rejected-TIME` (`stamp`, e.g. `20261202T032700.123Z`) with `main`'s mode; returns
/// the copy's path. Not `.toml`: `conf.d/*.toml` never picks it up.
pub fn keep_rejected(main: &Path, bytes: &[u8], stamp: &str) -> io::Result<PathBuf> {
    let name = main.file_name().unwrap_or_default().to_string_lossy();
    let mode = fs::metadata(main).map_or(0o600, |m| m.permissions().mode() & 0o7777);
    let mut copy = parent(main).join(format!("{name}.rejected-{stamp}"));
    let mut n = 1;
    while fs::symlink_metadata(&copy).is_ok() {
        n += 1;
        copy = parent(main).join(format!("{name}.rejected-{stamp}-{n}"));
    }
    write_atomically(&copy, bytes, mode)?;
    Ok(copy)
}

/// Replaces `path` with `bytes` atomically and durably. The new file keeps the mode of the
/// file it replaces (else gets `mode`).
pub fn write_atomically(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    write_atomically_with(path, mode, |file| file.write_all(bytes))
}

/// [`write_atomically`] of what `write` writes into the temporary file.
fn write_atomically_with(
    path: &Path,
    mode: u32,
    write: impl FnOnce(&mut File) -> io::Result<()>,
) -> io::Result<()> {
    let dir = parent(path);
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = dir.join(format!(".{name}.edgenetd-new"));
    let mode = fs::metadata(path).map_or(mode, |m| m.permissions().mode() & 0o7777);
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&tmp)?;
        // The umask (the unit's is 0077) must not narrow the mode the file had.
        file.set_permissions(fs::Permissions::from_mode(mode))?;
        write(&mut file)?;
        file.sync_all()?;
        fs::rename(&tmp, path)?;
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

fn parent(path: &Path) -> &Path {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Makes a rename or removal in `dir` durable.
fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("edgenetd-store-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn the_confirmed_copy_and_the_pending_marker_round_trip() {
        let dir = scratch("round");
        let store = Store::new(dir.join("state"));
        assert_eq!(store.read_pending().unwrap(), None);
        store.save_confirmed(b"[daemon]\n").unwrap();
        assert_eq!(store.read_confirmed().unwrap(), b"[daemon]\n");
        let record = PendingRecord {
            deadline_unix: 1_700_000_000,
            applied_from: "/tmp/new.toml".into(),
            main: Some("/etc/edgenetd/edgenetd.toml".into()),
            applied: Some(fingerprint(b"[policy]\n")),
        };
        store.save_pending(&record).unwrap();
        assert_eq!(store.read_pending().unwrap(), Some(Ok(record)));
        store.clear_pending().unwrap();
        store.clear_pending().unwrap();
        assert_eq!(store.read_pending().unwrap(), None);
        fs::write(dir.join("state").join(PENDING), b"garbage").unwrap();
        assert!(matches!(store.read_pending().unwrap(), Some(Err(_))));
        // A record from before the binding still reads, as bound to nothing.
        let old = br#"{"deadline_unix":1700000000,"applied_from":"/tmp/new.toml"}"#;
        fs::write(dir.join("state").join(PENDING), old).unwrap();
        let read = store.read_pending().unwrap().unwrap().unwrap();
        assert_eq!((read.main, read.applied), (None, None));
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_last_good_configuration_round_trips_and_garbage_is_said_to_be_garbage() {
        let dir = scratch("last-good");
        let store = Store::new(dir.join("state"));
        assert_eq!(store.read_last_good().unwrap(), None);
        let record = LastGoodRecord {
            main: "/etc/edgenetd/edgenetd.toml".into(),
            saved_unix: 1_700_000_000,
            files: vec![
                (
                    "/etc/edgenetd/edgenetd.toml".into(),
                    "[daemon]\n\"x\" = '\\'\n".into(),
                ),
                ("/etc/edgenetd/conf.d/10-a.toml".into(), String::new()),
            ],
            data: vec![(
                "/etc/edgenetd/blocklist.txt".into(),
                "# \"not toml\" = [\n192.0.2.1\n".into(),
            )],
        };
        fn refs(l: &[(String, String)]) -> Vec<(&str, &str)> {
            l.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect()
        }
        let (files, data) = (refs(&record.files), refs(&record.data));
        store
            .save_last_good(&record.main, record.saved_unix, &files, &data)
            .unwrap();
        assert_eq!(store.read_last_good().unwrap(), Some(Ok(record.clone())));
        // A record an older edgenetd wrote has no `data`: it still reads, with none.
        let old = serde_json::json!({
            "main": record.main,
            "saved_unix": record.saved_unix,
            "files": [{ "path": "/etc/edgenetd/edgenetd.toml", "text": "" }],
        });
        fs::write(store.last_good_path(), old.to_string()).unwrap();
        let read = store.read_last_good().unwrap().unwrap().unwrap();
        assert!(read.data.is_empty() && read.files.len() == 1);
        let mode = fs::metadata(store.last_good_path())
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);
        fs::write(
            store.last_good_path(),
            b"{\"main\":\"m\",\"saved_unix\":1,\"files\":[]}",
        )
        .unwrap();
        assert!(matches!(store.read_last_good().unwrap(), Some(Err(_))));
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_atomic_write_keeps_the_mode_and_leaves_no_temporary_file() {
        let dir = scratch("mode");
        fs::create_dir_all(&dir).unwrap();
        let main = dir.join("edgenetd.toml");
        fs::write(&main, "old").unwrap();
        fs::set_permissions(&main, fs::Permissions::from_mode(0o640)).unwrap();
        write_atomically(&main, b"new", 0o600).unwrap();
        assert_eq!(fs::read_to_string(&main).unwrap(), "new");
        let mode = fs::metadata(&main).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        let names: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("edgenetd.toml")]);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_rejected_copy_keeps_the_content_and_mode_and_never_overwrites_another() {
        let dir = scratch("rejected");
        fs::create_dir_all(&dir).unwrap();
        let main = dir.join("edgenetd.toml");
        fs::write(&main, "mine").unwrap();
        fs::set_permissions(&main, fs::Permissions::from_mode(0o640)).unwrap();
        let first = keep_rejected(&main, b"mine", "20261202T032700.000Z").unwrap();
        let second = keep_rejected(&main, b"also mine", "20261202T032700.000Z").unwrap();
        assert_eq!(
            first,
            dir.join("edgenetd.toml.rejected-20261202T032700.000Z")
        );
        assert_ne!(first, second);
        assert_eq!(fs::read(&first).unwrap(), b"mine");
        assert_eq!(fs::read(&second).unwrap(), b"also mine");
        let mode = fs::metadata(&first).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        let _ = fs::remove_dir_all(&dir);
    }
}
