from django import template
from django.utils.safestring import mark_safe

from content.markdown import render_markdown

register = template.Library()


@register.filter(name="markdown")
def markdown_filter(text: str) -> str:
    # Safe because render_markdown sanitizes with nh3 after rendering.
    return mark_safe(render_markdown(text))
