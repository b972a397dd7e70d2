//! Sections whose model lives above config: the fault-injection build's `[[test_controller]]`
//! (`fault::test_controller`), whose model is read by a controller of its own. Such a module
//! registers an [`Extension`] once, before the first load; from then on every load accepts the
//! section, validates it with the extension's function (every problem in the same
//! [`Diagnostics`], at its place) and carries the result in [`DesiredState::extensions`]
//! (one snapshot, so a reload changes it like any other section). Config names none of these
//! modules, so imports keep pointing one way: they use config, config never uses them.
//!
//! A build that registers nothing (every release build) accepts exactly the built-in sections;
//! a build without the `fault-injection` feature does not even look (see `registered`).
//!
//! [`DesiredState::extensions`]: super::DesiredState::extensions

use std::any::Any;
use std::fmt;
use std::sync::{Arc, Mutex};

use super::diag::Diagnostics;
use super::doc::Doc;

/// A section validated by a module above config.
pub struct Extension {
    /// The top-level key (`test_controller` for `[[test_controller]]`).
    pub section: &'static str,
    /// Validates the section (absent or not: an absent section gives its empty model).
    pub validate: fn(&Doc<'_>, &mut Diagnostics) -> Arc<dyn Model>,
}

/// A validated extension section: any `Debug` value the registering module reads back with
/// [`Extensions::get`].
pub trait Model: Any + fmt::Debug + Send + Sync {
    /// The value as `Any`, to downcast.
    fn as_any(&self) -> &dyn Any;
}

impl<T: Any + fmt::Debug + Send + Sync> Model for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The registered extensions, in registration order.
static REGISTERED: Mutex<Vec<&'static Extension>> = Mutex::new(Vec::new());

/// Registers `extension` for every later load; registering a section again changes nothing.
pub fn register(extension: &'static Extension) {
    // A poisoned lock only means a thread panicked while holding it; the list is intact.
    let mut list = REGISTERED.lock().unwrap_or_else(|e| e.into_inner());
    if !list.iter().any(|e| e.section == extension.section) {
        list.push(extension);
    }
}

/// The registered extensions. Only the fault-injection build has a module that registers one
/// (`fault::test_controller`), so every other build skips the lookup and carries none of it
/// (the default binary stays the size it was).
pub(super) fn registered() -> Vec<&'static Extension> {
    crate::fault_hook!(
        REGISTERED.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        Vec::new()
    )
}

/// Validates every registered extension's section of `doc`.
pub(super) fn validate(
    extensions: &[&'static Extension],
    doc: &Doc<'_>,
    diags: &mut Diagnostics,
) -> Extensions {
    Extensions(
        extensions
            .iter()
            .map(|e| (e.section, (e.validate)(doc, diags)))
            .collect(),
    )
}

/// The validated extension sections of one snapshot (none in a build that registers none).
#[derive(Debug, Clone, Default)]
pub struct Extensions(Vec<(&'static str, Arc<dyn Model>)>);

impl Extensions {
    /// The model of `section`, if that section is registered and its model is a `T`.
    pub fn get<T: Any>(&self, section: &str) -> Option<&T> {
        self.0
            .iter()
            .find(|(s, _)| *s == section)
            // `Arc<dyn Model>` is a `Model` too (the blanket impl): ask the value inside.
            .and_then(|(_, m)| Model::as_any(&**m).downcast_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::load_str;

    /// The entries of `[[extension_test]]`, as this test's extension validates them.
    #[derive(Debug, PartialEq)]
    struct Names(Vec<String>);

    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct RawEntry {
        name: String,
    }

    fn validate_names(doc: &Doc<'_>, diags: &mut Diagnostics) -> Arc<dyn Model> {
        let items = doc.items::<RawEntry>("extension_test", diags);
        Arc::new(Names(
            items.into_iter().map(|i| i.into_inner().name).collect(),
        ))
    }

    static EXTENSION: Extension = Extension {
        section: "extension_test",
        validate: validate_names,
    };

    #[test]
    fn a_registered_section_is_validated_at_its_place_and_carried_in_the_state() {
        let text = "[[extension_test]]\nname = \"a\"\n[[extension_test]]\nname = \"b\"\n";
        register(&EXTENSION);
        register(&EXTENSION);
        let list = REGISTERED.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let entries = list.iter().filter(|e| e.section == "extension_test");
        assert_eq!(entries.count(), 1, "registered once");
        if registered().is_empty() {
            // A build that takes no extensions (no fault-injection): the section stays unknown.
            let e = load_str(&[("main.toml", text)]).unwrap_err();
            assert!(
                e.rendered.contains("unknown section `extension_test`"),
                "{}",
                e.rendered
            );
            return;
        }
        let state = load_str(&[("main.toml", text)]).unwrap();
        let names = state.extensions.get::<Names>("extension_test");
        assert_eq!(names, Some(&Names(vec!["a".into(), "b".into()])));
        assert_eq!(state.extensions.get::<String>("extension_test"), None);
        assert_eq!(state.extensions.get::<Names>("other"), None);
        let e = load_str(&[("main.toml", "[[extension_test]]\nnmae = \"a\"\n")]).unwrap_err();
        assert!(
            e.rendered.contains("unknown field `nmae`") && e.rendered.contains("main.toml:2:"),
            "{}",
            e.rendered
        );
    }
}
