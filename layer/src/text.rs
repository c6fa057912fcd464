//! Text that came from a file — tensor names, metadata, shard and file names — made safe to
//! print: every control character (C0, DEL, C1) and every bidirectional-text control written as
//! an escape (`\n`, `\u{1b}`), so that no name can move the cursor, set a window title, reach the
//! clipboard, clear the screen, forge a line of a table or reorder what is shown. Everything else
//! is shown as it is (a name in Chinese stays readable), and escaping twice changes nothing.
//!
//! ```
//! use dtcast::layer::text::{escape, quote};
//! assert_eq!(escape("model.layers.0.weight"), "model.layers.0.weight");
//! assert_eq!(escape("a\u{1b}]0;pwned\u{7}b"), r"a\u{1b}]0;pwned\u{7}b");
//! assert_eq!(escape("row\r\nfake row"), r"row\r\nfake row");
//! assert_eq!(escape("权重\u{9b}2J"), r"权重\u{9b}2J");
//! assert_eq!(escape(&escape("\u{202e}txt.exe")), r"\u{202e}txt.exe");
//! assert_eq!(quote("abcdefghij", 6), "abcdef… (10 characters)");
//! ```

use std::borrow::Cow;
use std::fmt::Write;

/// Whether `c` is written as an escape: a control character, or one that changes the direction
/// of the text around it.
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

/// `text` with its control characters escaped (see the module docs); borrowed where it has none.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut s = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        push(&mut s, c);
    }
    Cow::Owned(s)
}

fn push(s: &mut String, c: char) {
    if needs_escape(c) {
        // `\n`, `\r`, `\t` or `\u{…}`: what Rust's own escapes write.
        let _ = write!(s, "{}", c.escape_default());
    } else {
        s.push(c);
    }
}

/// [`escape`]d and cut after about `max` bytes, for a message that must stay one short line
/// whatever came in: a cut says how long the whole was.
pub fn quote(text: &str, max: usize) -> String {
    let mut s = String::new();
    for c in text.chars() {
        let before = s.len();
        push(&mut s, c);
        if s.len() > max {
            s.truncate(before);
            let _ = write!(s, "… ({} characters)", text.chars().count());
            break;
        }
    }
    s
}
