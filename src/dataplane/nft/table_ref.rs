//! [`TableRef`]: a table named by family and name, what batch messages and listings refer to.

use super::ir::{Family, Table};

/// A table named by family and name (what batch messages refer to).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TableRef {
    /// Family.
    pub family: Family,
    /// Name.
    pub name: String,
}

impl TableRef {
    /// `family name`.
    pub fn new(family: Family, name: impl Into<String>) -> TableRef {
        TableRef {
            family,
            name: name.into(),
        }
    }
}

impl From<&Table> for TableRef {
    fn from(t: &Table) -> TableRef {
        TableRef::new(t.family, t.name.clone())
    }
}
