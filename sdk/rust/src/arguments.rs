//! How a skill's arguments split into words. One rule for the host (which
//! substitutes `$0`, `$ARGUMENTS[N]` into `SKILL.md` text) and the SDK
//! (which hands a skill component its words): the host includes this very
//! file, so the two cannot drift apart. It uses nothing outside `std`.

/// Splits arguments into words: whitespace separates, double or single
/// quotes keep spaces inside one word (and are dropped).
pub fn split(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    let mut started = false;
    for c in text.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => current.push(c),
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                started = true;
            }
            None if c.is_whitespace() => {
                if started {
                    words.push(std::mem::take(&mut current));
                    started = false;
                }
            }
            None => {
                current.push(c);
                started = true;
            }
        }
    }
    if started {
        words.push(current);
    }
    words
}
