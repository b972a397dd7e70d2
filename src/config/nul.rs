//! Names that reach the kernel (interfaces, nftables objects and comments) go there as C
//! strings, which end at the first NUL byte: `"eth0\u0000x"` would silently become `eth0`.
//! So a NUL in such a name is a config error at its place.

use toml::Spanned;

use super::diag::Diagnostics;

/// True when `value` has no NUL byte; otherwise records an error naming `what` at its place.
pub fn no_nul(value: &Spanned<String>, what: &str, diags: &mut Diagnostics) -> bool {
    if !value.get_ref().contains('\0') {
        return true;
    }
    diags.error(
        value.span(),
        format!(
            "invalid {what} {:?}: contains a NUL byte (\\u0000), where the kernel would cut it",
            value.get_ref()
        ),
    );
    false
}
