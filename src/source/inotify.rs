//! Directory change notifications (inotify) for the config watcher.
//!
//! The watcher only needs to know *that* something in the config directory or `conf.d`
//! changed; it then compares file fingerprints to decide whether to reload. So events are
//! drained, never parsed. Watching directories (not files) catches editors that save by
//! writing a new file and renaming it over the old one, and files added to `conf.d`.
// inotify has no std wrapper: init and add_watch are libc calls, each saying why it is sound.
#![allow(unsafe_code)]

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use smol::Async;

/// What counts as a change in a watched directory.
const MASK: u32 = libc::IN_CLOSE_WRITE
    | libc::IN_MODIFY
    | libc::IN_ATTRIB
    | libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF;

/// An inotify instance watching a few directories.
pub struct DirWatch {
    fd: Async<File>,
}

impl DirWatch {
    /// A watch with no directories yet.
    pub fn new() -> io::Result<DirWatch> {
        // SAFETY: inotify_init1 takes flags only; a non-negative result is a new owned fd.
        let raw = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh fd nobody else owns.
        let file = unsafe { File::from_raw_fd(raw) };
        Ok(DirWatch {
            fd: Async::new(file)?,
        })
    }

    /// Watches `dir` (adding a directory twice is harmless); a missing one is an error the
    /// caller may ignore and retry later.
    pub fn add(&self, dir: &Path) -> io::Result<()> {
        let mut path = dir.as_os_str().as_bytes().to_vec();
        path.push(0);
        // SAFETY: valid inotify fd and a NUL-terminated path.
        let wd =
            unsafe { libc::inotify_add_watch(self.fd.as_raw_fd(), path.as_ptr().cast(), MASK) };
        if wd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Waits until at least one event arrived, then drains every pending event.
    pub async fn changed(&self) -> io::Result<()> {
        self.fd.readable().await?;
        let mut buf = [0u8; 4096];
        let mut file: &File = self.fd.get_ref();
        loop {
            match file.read(&mut buf) {
                Ok(0) => return Ok(()),
                Ok(_) => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    }
}
