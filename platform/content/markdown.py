"""Markdown -> sanitized HTML. All content and candidate-visible text goes through here."""

import markdown as md
import nh3

ALLOWED_TAGS = {
    "p", "br", "hr", "em", "strong", "code", "pre", "blockquote", "ul", "ol", "li",
    "h1", "h2", "h3", "h4", "h5", "h6", "a", "table", "thead", "tbody", "tr", "th", "td",
    "sub", "sup", "del", "span", "div",
}
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "code": {"class"}, "span": {"class"}}


def render_markdown(text: str) -> str:
    html = md.markdown(text or "", extensions=["fenced_code", "tables", "sane_lists"])
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )
