use super::*;

fn md(html: &str) -> String {
    convert(
        html,
        Url::parse("https://example.com/docs/page.html")
            .ok()
            .as_ref(),
    )
    .markdown
}

#[test]
fn headings_paragraphs_and_inline_marks() {
    let out = md(
        "<h1>Title</h1><p>Some <b>bold</b> and <em>italic</em> text with <code>x * y</code>.</p>\
         <h2>Next   part</h2><p>Line one<br>line two</p>",
    );
    assert_eq!(
        out,
        "# Title\n\nSome **bold** and *italic* text with `x * y`.\n\n## Next part\n\nLine one  \nline two"
    );
}

#[test]
fn links_and_images_are_made_absolute() {
    let out = md(
        "<p>See <a href=\"other.html\">the other page</a>, <a href=\"/root\">root</a>, \
         <a href=\"https://docs.rs/x\">docs</a> and <a href=\"#top\">top</a>.</p>\
         <img src=\"img/a.png\" alt=\"A diagram\"><img src=\"spacer.gif\" alt=\"\">\
         <a href=\"javascript:void(0)\">click</a>",
    );
    assert!(
        out.contains("[the other page](https://example.com/docs/other.html)"),
        "{out}"
    );
    assert!(out.contains("[root](https://example.com/root)"), "{out}");
    assert!(out.contains("[docs](https://docs.rs/x)"), "{out}");
    assert!(out.contains("[top](#top)"), "{out}");
    assert!(
        out.contains("![A diagram](https://example.com/docs/img/a.png)"),
        "{out}"
    );
    assert!(!out.contains("spacer"), "{out}");
    assert!(
        out.contains("click") && !out.contains("javascript"),
        "{out}"
    );
}

#[test]
fn lists_nested_and_numbered() {
    let out = md(
        "<ul><li>one</li><li>two<ul><li>inner</li></ul></li></ul><ol><li><p>first</p></li><li>second</li></ol>",
    );
    assert_eq!(out, "- one\n- two\n  - inner\n\n1. first\n2. second");
}

#[test]
fn code_blocks_keep_their_text_and_language() {
    let out = md(
        "<p>Example:</p><pre><code class=\"language-rust\">fn main() {\n    println!(\"&lt;hi&gt;\");\n}</code></pre><p>after</p>",
    );
    assert_eq!(
        out,
        "Example:\n\n```rust\nfn main() {\n    println!(\"<hi>\");\n}\n```\n\nafter"
    );
}

#[test]
fn tables_become_markdown_tables() {
    let out = md("<table><thead><tr><th>Name</th><th>Kind</th></tr></thead>\
         <tbody><tr><td>fs</td><td>files | folders</td></tr><tr><td><a href=\"/web\">web</a></td><td>pages</td></tr></tbody></table>");
    assert_eq!(
        out,
        "| Name | Kind |\n| --- | --- |\n| fs | files \\| folders |\n| [web](https://example.com/web) | pages |"
    );
}

#[test]
fn scripts_styles_navigation_and_hidden_parts_are_dropped() {
    let out = md(
        "<html><head><title>The  Page</title><style>p { color: red }</style>\
         <script>var x = \"<p>not text</p>\";</script></head>\
         <body><nav><a href=\"/\">Home</a></nav><div role=\"navigation\">menu</div>\
         <main><p>Body text.</p><div hidden>secret</div></main>\
         <footer>Copyright</footer><noscript>enable js</noscript></body></html>",
    );
    assert_eq!(out, "Body text.");
    let title = convert("<title>The  Page</title><p>x</p>", None).title;
    assert_eq!(title.as_deref(), Some("The Page"));
}

#[test]
fn quotes_rules_and_entities() {
    let out = md(
        "<blockquote><p>Quoted &amp; wise.</p><p>Second.</p></blockquote><hr><p>a_b [c] &lt;d&gt;</p>",
    );
    assert_eq!(
        out,
        "> Quoted & wise.\n>\n> Second.\n\n---\n\na\\_b \\[c\\] \\<d\\>"
    );
}

#[test]
fn broken_html_is_read_without_losing_text() {
    let out = md("<p>unclosed <b>bold<p>next</div></span> tail");
    assert!(out.contains("unclosed **bold"), "{out}");
    assert!(out.contains("next") && out.contains("tail"), "{out}");
}
