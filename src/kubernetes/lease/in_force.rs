//! The TOML in force, as the Lease shows it: a content hash of its files that any edgenetd
//! version computes alike (SHA-256, not the process-local hasher the reloads use to compare),
//! and a generation that counts the changes of that content.

use std::sync::Mutex;

use crate::config::ConfigTexts;

/// The content hash of `texts`: `sha256:` and the hex digest of, for each config file in
/// load order (the main file, then `conf.d` in name order) and then each data file
/// (`loadfile`) in the order first read: its path, a NUL, its length in bytes (decimal), a
/// NUL, and its bytes.
pub fn digest(texts: &ConfigTexts) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for (path, text) in texts.files.iter().chain(&texts.data) {
        ctx.update(path.as_os_str().as_encoded_bytes());
        ctx.update(b"\0");
        ctx.update(text.len().to_string().as_bytes());
        ctx.update(b"\0");
        ctx.update(text.as_bytes());
    }
    let mut out = String::with_capacity(71);
    out.push_str("sha256:");
    for b in ctx.finish().as_ref() {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// The hash and generation of the TOML in force, shared by the reloads (which set it) and
/// the Lease writer (which reads it).
#[derive(Debug)]
pub struct InForce(Mutex<(u64, Option<String>)>);

impl InForce {
    /// Generation 1: the configuration the daemon started with, whose hash is `digest`
    /// (`None` when it is not known: a fallback ran instead of the files).
    pub fn new(digest: Option<String>) -> InForce {
        InForce(Mutex::new((1, digest)))
    }

    /// A configuration came into force (`texts`: its files; `None` when they are not
    /// known): the generation moves on when its content differs from the one in force.
    pub fn took(&self, texts: Option<&ConfigTexts>) {
        let next = texts.map(digest);
        let mut now = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if next.is_none() || next != now.1 {
            now.0 += 1;
            now.1 = next;
        }
    }

    /// The generation and the hash now.
    pub fn get(&self) -> (u64, Option<String>) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn texts(main: &str, data: &[(&str, &str)]) -> ConfigTexts {
        ConfigTexts {
            files: vec![(PathBuf::from("/etc/edgenetd/edgenetd.toml"), main.into())],
            data: data
                .iter()
                .map(|(p, t)| (PathBuf::from(p), t.to_string()))
                .collect(),
        }
    }

    #[test]
    fn the_digest_is_sha256_over_paths_lengths_and_bytes() {
        // Pinned: any edgenetd, any version, computes this for these files.
        let t = texts("[daemon]\n", &[]);
        let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
        ctx.update(b"/etc/edgenetd/edgenetd.toml\x009\x00[daemon]\n");
        let want: String = ctx
            .finish()
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(digest(&t), format!("sha256:{want}"));
        assert_ne!(
            digest(&t),
            digest(&texts("[daemon]\n", &[("/etc/edgenetd/block.txt", "")])),
            "a data file is part of the content"
        );
    }

    #[test]
    fn the_generation_counts_changes_of_content_only() {
        let a = texts("[daemon]\n", &[]);
        let b = texts("[daemon]\nroute_protocol = 191\n", &[]);
        let f = InForce::new(Some(digest(&a)));
        assert_eq!(f.get(), (1, Some(digest(&a))));
        f.took(Some(&a));
        assert_eq!(f.get().0, 1, "the same content again");
        f.took(Some(&b));
        assert_eq!(f.get(), (2, Some(digest(&b))));
        f.took(None);
        assert_eq!(f.get(), (3, None), "unknown content is a change");
        f.took(Some(&b));
        assert_eq!(f.get(), (4, Some(digest(&b))));
    }
}
