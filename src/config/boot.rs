//! What a start whose config does not validate falls back to (issue 23): the texts of the
//! last configuration that came into force (kept by the daemon, loaded again here), or a
//! built-in lockdown built from the `[daemon]` and `[controller.*]` sections read on their
//! own. Nothing here writes a file; the daemon keeps and reads the copies.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use toml::de::DeTable;

use super::daemon::{self, ControllerSettings, DaemonSettings};
use super::diag::Diagnostics;
use super::doc::{Doc, shift_table};
use super::source_map::SourceMap;
use super::{ConfigError, DesiredState, config_files, limits, load_str, text};

/// The files of one valid load as they were read: (path, text), the main file first, then
/// `conf.d` in name order. What the daemon keeps as the last good configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigTexts(pub Vec<(PathBuf, String)>);

/// The name the built-in lockdown is shown as (in logs and `files`).
pub const LOCKDOWN_NAME: &str = "(built-in lockdown)";

/// The zone and rule names of the lockdown (they show in `nft list`).
const MANAGEMENT_ZONE: &str = "management";

/// Loads `texts` (kept from an earlier valid load) as if they were the files they came from:
/// problems name those paths, and `files` lists them.
pub fn load_texts(texts: &ConfigTexts) -> Result<DesiredState, ConfigError> {
    let names: Vec<String> = texts
        .0
        .iter()
        .map(|(p, _)| p.display().to_string())
        .collect();
    let files: Vec<(&str, &str)> = names
        .iter()
        .zip(&texts.0)
        .map(|(n, (_, t))| (n.as_str(), t.as_str()))
        .collect();
    let state = load_str(&files)?;
    Ok(DesiredState {
        files: texts.0.iter().map(|(p, _)| p.clone()).collect(),
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
        let texts = ConfigTexts(vec![
            (
                PathBuf::from("/etc/edgenetd/edgenetd.toml"),
                "[daemon]\nroute_protocol = 191\n".into(),
            ),
            (
                PathBuf::from("/etc/edgenetd/conf.d/10-a.toml"),
                "[daemon]\nroute_protocol = 192\n".into(),
            ),
        ]);
        let e = load_texts(&texts).unwrap_err();
        assert!(
            e.rendered.contains("/etc/edgenetd/conf.d/10-a.toml:2:"),
            "{}",
            e.rendered
        );
        let good = ConfigTexts(vec![texts.0[0].clone()]);
        let state = load_texts(&good).unwrap();
        assert_eq!(state.daemon.route_protocol, 191);
        assert_eq!(state.files, [PathBuf::from("/etc/edgenetd/edgenetd.toml")]);
    }
}
