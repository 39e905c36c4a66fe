//! Sections of a generated page that another example owns. `docs/accuracy.md` is written
//! whole by `examples/accuracy.rs`, but a study of its own (`examples/concurrency.rs`)
//! writes one section into it, between two marker lines (HTML comments, so the page
//! shows nothing of them):
//!
//! ```text
//! <!-- begin section NAME (written by its own example; kept when the page is regenerated) -->
//! ## Heading
//! ...
//! <!-- end section NAME -->
//! ```
//!
//! The owner sets its section with [`replace`]; the example that regenerates the whole
//! page passes the page it is about to write through [`keep`], which carries every marked
//! section of the old page over to the same place in the new one.

// Each study uses part of this file.
#![allow(dead_code)]

use std::ops::Range;

const BEGIN: &str = "<!-- begin section ";
const END: &str = "<!-- end section ";

/// `body` (from its `## ` heading on) between the markers of section `name`.
fn block(name: &str, body: &str) -> String {
    format!(
        "{BEGIN}{name} (written by its own example; kept when the page is regenerated) -->\n\
         {}\n\n{END}{name} -->\n\n",
        body.trim_end()
    )
}

/// The marked sections of `page`: each one's name and its bytes, markers and the blank
/// lines after them included.
fn marked(page: &str) -> Vec<(String, Range<usize>)> {
    let mut sections = Vec::new();
    let mut open: Option<(String, usize)> = None;
    let mut at = 0;
    for line in page.split_inclusive('\n') {
        let start = at;
        at += line.len();
        if let Some(rest) = line.strip_prefix(BEGIN) {
            let name = rest.split_whitespace().next().unwrap_or_default();
            open = Some((name.to_owned(), start));
        } else if let Some(rest) = line.strip_prefix(END) {
            let name = rest.split_whitespace().next().unwrap_or_default();
            if let Some((open_name, begin)) = open.take().filter(|(n, _)| n == name) {
                // The blank lines after the end marker go with the section.
                let tail = page[at..].len() - page[at..].trim_start_matches('\n').len();
                sections.push((open_name, begin..at + tail));
            }
        }
    }
    sections
}

/// Where `heading` (a whole line, such as `## Real traces with true parents`) starts in
/// `page`, if it is there.
fn heading_at(page: &str, heading: &str) -> Option<usize> {
    let mut at = 0;
    for line in page.split_inclusive('\n') {
        if line.trim_end() == heading {
            return Some(at);
        }
        at += line.len();
    }
    None
}

/// `page` with `block` inserted before the line `heading`, or at the end without it.
fn insert_before(page: &str, heading: Option<&str>, block: &str) -> String {
    match heading.and_then(|h| heading_at(page, h)) {
        Some(at) => format!("{}{block}{}", &page[..at], &page[at..]),
        None => format!("{}\n\n{}", page.trim_end(), block.trim_end()) + "\n",
    }
}

/// `page` with section `name` set to `body`: in place of the marked section of that name
/// if `page` has one, else before the line `before` (at the end without it).
pub fn replace(page: &str, name: &str, body: &str, before: &str) -> String {
    let block = block(name, body);
    match marked(page).into_iter().find(|(n, _)| n == name) {
        Some((_, range)) => format!("{}{block}{}", &page[..range.start], &page[range.end..]),
        None => insert_before(page, Some(before), &block),
    }
}

/// `new`, a regenerated page, with every marked section of `old` (the page it replaces)
/// that `new` lacks: each one before the heading that followed it in `old`, or at the end.
pub fn keep(old: &str, new: &str) -> String {
    let mut page = new.to_owned();
    let present: Vec<String> = marked(new).into_iter().map(|(n, _)| n).collect();
    for (name, range) in marked(old) {
        if present.contains(&name) {
            continue;
        }
        let next = old[range.end..]
            .lines()
            .find(|l| l.starts_with("## ") || l.starts_with("# "));
        page = insert_before(&page, next, &old[range]);
    }
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "# Page\n\nIntro.\n\n## One\n\nText.\n\n## Two\n\nMore.\n";

    #[test]
    fn a_new_section_goes_before_its_heading_and_is_then_replaced() {
        let once = replace(PAGE, "mine", "## Mine\n\nFirst.\n", "## Two");
        assert!(once.contains("Text.\n\n<!-- begin section mine"));
        assert!(once.contains("First.\n\n<!-- end section mine -->\n\n## Two\n"));
        let twice = replace(&once, "mine", "## Mine\n\nSecond.", "## Two");
        assert_eq!(twice, once.replace("First.", "Second."));
    }

    #[test]
    fn without_its_heading_a_section_goes_at_the_end() {
        let page = replace(PAGE, "mine", "## Mine\n\nFirst.\n", "## Three");
        assert!(page.ends_with("More.\n\n<!-- begin section mine (written by its own example; kept when the page is regenerated) -->\n## Mine\n\nFirst.\n\n<!-- end section mine -->\n"));
    }

    #[test]
    fn a_regenerated_page_keeps_the_sections_it_does_not_write() {
        let old = replace(PAGE, "mine", "## Mine\n\nFirst.\n", "## Two");
        let regenerated = PAGE.replace("More.", "Changed.");
        let kept = keep(&old, &regenerated);
        assert_eq!(kept, old.replace("More.", "Changed."));
        // Once kept, keeping again changes nothing.
        assert_eq!(keep(&kept, &kept), kept);
        // A page with no marked section is left as it is.
        assert_eq!(keep(PAGE, &regenerated), regenerated);
    }
}
