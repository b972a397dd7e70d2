//! What a start whose config does not validate falls back to (issue 23): the texts of the
//! last configuration that came into force (kept by the daemon, loaded again here), or a
//! built-in lockdown built from the `[daemon]` and `[controller.*]` sections read on their
//! own. Nothing here writes a file; the daemon keeps and reads the copies.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use toml::de::DeTable;

use super::daemon::{self, ControllerSettings, DaemonSettings};
use super::data_file::DataFiles;
use super::diag::Diagnostics;
use super::doc::{Doc, shift_table};
use super::source_map::SourceMap;
use super::{ConfigError, DesiredState, config_files, limits, load_str, load_str_with, text};

/// The files of one valid load as they were read. What the daemon keeps as the last good
/// configuration: with the data files, it loads again without reading the disk.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ConfigTexts {
    /// The config files, (path, text): the main file first, then `conf.d` in name order.
    pub files: Vec<(PathBuf, String)>,
    /// The data files they name (`loadfile`), (path, text), in the order first read.
    pub data: Vec<(PathBuf, String)>,
}

/// The name the built-in lockdown is shown as (in logs and `files`).
pub const LOCKDOWN_NAME: &str = "(built-in lockdown)";

/// The zone and rule names of the lockdown (they show in `nft list`).
const MANAGEMENT_ZONE: &str = "management";

/// Loads `texts` (kept from an earlier valid load) as if they were the files they came from:
/// problems name those paths, and `files` lists them. Data files come from `texts.data`
/// only, never from disk.
pub fn load_texts(texts: &ConfigTexts) -> Result<DesiredState, ConfigError> {
    let names: Vec<String> = texts
        .files
        .iter()
        .map(|(p, _)| p.display().to_string())
        .collect();
    let files: Vec<(&str, &str)> = names
        .iter()
        .zip(&texts.files)
        .map(|(n, (_, t))| (n.as_str(), t.as_str()))
        .collect();
    let state = load_str_with(&files, DataFiles::from_kept(&texts.data))?;
    Ok(DesiredState {
        files: texts.files.iter().map(|(p, _)| p.clone()).collect(),
        ..state
    })
}

/// `[daemon]` and `[controller.*]` of the files rooted at `main`, read on their own: every
/// other section is left out, and a file is read as far as TOML's recoverable parser gets
/// (a syntax error elsewhere in it does not hide them). Any problem in these two sections
/// is an error: the caller then takes the defaults.
pub fn read_settings_leniently(
    main: &Path,
) -> Result<(DaemonSettings, BTreeMap<&'static str, ControllerSettings>), ConfigError> {
    let mut sources = SourceMap::default();
    let mut diags = Diagnostics::default();
    let mut total = 0u64;
    for path in config_files(main) {
        match text::read_at_most(&path, limits::budget(total)) {
            text::FileText::Text(text) => {
                total += text.len() as u64;
                sources.add(path, text);
            }
            // Unread files hold no settings this can use; the full load has said why.
            _ => continue,
        }
    }
    let mut doc = Doc::new(super::KEY_CLASHES);
    for file in sources.files() {
        if limits::too_deep(&file.text).is_some() {
            continue;
        }
        let (table, _syntax_errors) = DeTable::parse_recoverable(&file.text);
        let table: DeTable<'_> = shift_table(table.into_inner(), file.base)
            .into_iter()
            .filter(|(k, _)| matches!(&**k.get_ref(), "daemon" | "controller"))
            .collect();
        doc.merge(table, &mut diags);
    }
    let settings = daemon::validate_daemon(&doc, &mut diags);
    let controllers = daemon::validate_controllers(&doc, &mut diags);
    if diags.is_empty() {
        Ok((settings, controllers))
    } else {
        Err(ConfigError::new(&diags, &sources))
    }
}

/// The built-in lockdown's `[policy]`: input and forward drop, output accept; the policy
/// table's skeleton already accepts loopback, established/related and IPv6 neighbour
/// discovery; input from the `management` interfaces is accepted.
pub fn lockdown_policy_text(management: &[String]) -> String {
    let mut text =
        "[policy]\ninput = \"drop\"\nforward_default = \"drop\"\noutput = \"accept\"\n".to_string();
    if !management.is_empty() {
        // Literal strings: a validated interface name holds no `'`.
        let names: Vec<String> = management.iter().map(|n| format!("'{n}'")).collect();
        text.push_str(&format!(
            "\n[policy.zone.{MANAGEMENT_ZONE}]\ninterfaces = [{}]\n\n[[policy.rule]]\nname = \"lockdown-management\"\nfrom = \"{MANAGEMENT_ZONE}\"\nto = \"self\"\naction = \"accept\"\n",
            names.join(", ")
        ));
    }
    text
}

/// The built-in lockdown: [`lockdown_policy_text`] over `daemon.management`, with these
/// daemon and controller settings. The route and service controllers are held: what a
/// previous run programmed stays in the kernel (a route to a management network, services
/// the firewall now guards) until a valid config says otherwise.
pub fn lockdown(
    daemon: DaemonSettings,
    controllers: BTreeMap<&'static str, ControllerSettings>,
) -> DesiredState {
    let text = lockdown_policy_text(&daemon.management);
    // The text is built from validated names: it always loads (a unit test holds it to that).
    let policy = load_str(&[(LOCKDOWN_NAME, &text)])
        .map(|s| s.policy)
        .unwrap_or_else(|e| panic!("the built-in lockdown does not load: {e}"));
    DesiredState {
        daemon,
        controllers,
        policy,
        files: vec![PathBuf::from(LOCKDOWN_NAME)],
        held: vec!["service", "route"],
        ..DesiredState::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::policy::Action;

    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("edgenetd-boot-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("conf.d")).unwrap();
        dir
    }

    #[test]
    fn the_lockdown_drops_input_and_forward_and_opens_only_the_management_interfaces() {
        let daemon = DaemonSettings {
            management: vec!["eth1".into(), "mgmt*".into()],
            ..DaemonSettings::default()
        };
        let state = lockdown(daemon, BTreeMap::new());
        let p = state.policy.unwrap();
        assert_eq!(
            (p.input, p.forward, p.output),
            (Action::Drop, Action::Drop, Action::Accept)
        );
        assert_eq!(p.zones[MANAGEMENT_ZONE].interfaces, ["eth1", "mgmt*"]);
        assert_eq!(p.rules.len(), 1);
        assert!(state.routing.routes.is_empty() && state.services.services.is_empty());
        assert_eq!(
            state.held,
            ["service", "route"],
            "routes and services stay as they are"
        );
        let none = lockdown(DaemonSettings::default(), BTreeMap::new())
            .policy
            .unwrap();
        assert!(none.zones.is_empty() && none.rules.is_empty());
        assert_eq!(none.input, Action::Drop);
    }

    #[test]
    fn the_daemon_section_is_read_past_problems_elsewhere() {
        let dir = scratch("lenient");
        let main = dir.join("edgenetd.toml");
        std::fs::write(
            &main,
            "[daemon]\nmanagement = [\"eth9\"]\nnft_table_prefix = \"edge\"\n\n[policy.zone.lan]\nhelpers = [\"nope\"]\ninterfaces = [\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("conf.d/10-x.toml"),
            "[controller.route]\nenabled = false\n[[route]]\nto = 7\n",
        )
        .unwrap();
        assert!(crate::config::load_keeping_texts(&main).is_err());
        let (daemon, controllers) = read_settings_leniently(&main).unwrap();
        assert_eq!(daemon.management, ["eth9"]);
        assert_eq!(daemon.nft_table_prefix, "edge");
        assert!(!controllers["route"].enabled);
        // A problem in `[daemon]` itself is one.
        std::fs::write(&main, "[daemon]\nmanagement = [\"a b\"]\n").unwrap();
        let e = read_settings_leniently(&main).unwrap_err();
        assert!(e.first.contains("management"), "{}", e.first);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn kept_texts_load_under_their_own_names() {
        let texts = ConfigTexts {
            files: vec![
                (
                    PathBuf::from("/etc/edgenetd/edgenetd.toml"),
                    "[daemon]\nroute_protocol = 191\n".into(),
                ),
                (
                    PathBuf::from("/etc/edgenetd/conf.d/10-a.toml"),
                    "[daemon]\nroute_protocol = 192\n".into(),
                ),
            ],
            data: Vec::new(),
        };
        let e = load_texts(&texts).unwrap_err();
        assert!(
            e.rendered.contains("/etc/edgenetd/conf.d/10-a.toml:2:"),
            "{}",
            e.rendered
        );
        let good = ConfigTexts {
            files: vec![texts.files[0].clone()],
            data: Vec::new(),
        };
        let state = load_texts(&good).unwrap();
        assert_eq!(state.daemon.route_protocol, 191);
        assert_eq!(state.files, [PathBuf::from("/etc/edgenetd/edgenetd.toml")]);
    }

    /// The last good copy runs what was in force: a `loadfile` is served from the texts kept
    /// with it, even when the file on disk is gone or now broken.
    #[test]
    fn kept_texts_serve_loadfile_data_from_the_copy_never_from_disk() {
        let dir = scratch("kept-data");
        let data = dir.join("blocklist.txt");
        std::fs::write(&data, "not an address\n").unwrap();
        let main = format!(
            "[policy]\n[policy.set.blocked]\ntype = \"ipv4\"\nloadfile = \"{}\"\n",
            data.display()
        );
        let texts = ConfigTexts {
            files: vec![(dir.join("edgenetd.toml"), main)],
            data: vec![(data.clone(), "# kept\n192.0.2.7\n".into())],
        };
        let state = load_texts(&texts).unwrap();
        let set = &state.policy.unwrap().sets["blocked"];
        assert_eq!(
            set.elements,
            ["192.0.2.7/32".parse::<ipnet::IpNet>().unwrap()]
        );
        std::fs::remove_file(&data).unwrap();
        assert!(load_texts(&texts).is_ok(), "the disk is never read");
        let without = ConfigTexts {
            data: Vec::new(),
            ..texts
        };
        let e = load_texts(&without).unwrap_err();
        assert!(
            e.rendered.contains("not in the kept copy"),
            "{}",
            e.rendered
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// An include's snippet is kept like a data file: the copy runs the text that was in
    /// force, whatever the file on disk now says.
    #[test]
    fn kept_texts_serve_an_include_s_snippet_from_the_copy() {
        let dir = scratch("kept-include");
        let snippet = dir.join("extra.nft");
        std::fs::write(&snippet, "tcp dport 9 frobnicate\n").unwrap();
        let main = format!(
            "[policy]\n[[policy.include]]\npath = \"{}\"\nposition = \"chain-pre\"\nchain = \"input\"\n",
            snippet.display()
        );
        let texts = ConfigTexts {
            files: vec![(dir.join("edgenetd.toml"), main)],
            data: vec![(snippet.clone(), "tcp dport 22 accept\n".into())],
        };
        let state = load_texts(&texts).unwrap();
        let inc = &state.policy.unwrap().includes[0];
        assert_eq!(inc.text, "tcp dport 22 accept\n");
        assert!(inc.at.ends_with("edgenetd.toml:3:8"), "{}", inc.at);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
