"""Sphinx configuration of the course's website (built by tools/build_site.py, `make site`).

The pages are the notebooks as the replay run executed them (build/replay/<machine>/), so
nothing is executed here; every file a page loads ships in build/site/ (no CDN, no fonts from
outside), which `make site-test` checks in a real browser.
"""

project = "Moving data in PyTorch"
author = "the course's authors"
copyright = "the course's authors"

extensions = ["myst_nb"]
exclude_patterns = ["_generated/*", "**.ipynb_checkpoints"]
templates_path = ["_templates"]

# Notebooks are executed beforehand by tools/replay_all.py, on every recorded machine.
nb_execution_mode = "off"
nb_merge_streams = True  # one output block per cell, not one per print call
nb_render_markdown_format = "gfm"  # claims tables and "what we see" are GitHub-flavoured markdown
nb_ipywidgets_js = {}  # no widget scripts from a CDN
myst_heading_anchors = 3

html_theme = "sphinx_book_theme"
html_title = "Moving data in PyTorch"
html_static_path = ["_static"]
html_css_files = ["site.css"]
html_last_updated_fmt = None
html_copy_source = False
html_show_sourcelink = False
html_theme_options = {
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "use_download_button": False,
    "use_fullscreen_button": False,
    "home_page_in_toc": True,
    "footer_content_items": [],  # no "By ... (c) ..." line under every page
}
# Math, should a page ever hold some: MathJax 3 from build/site/_static, never a CDN
# (tools/build_site.py copies it there from its npm package when it is present).
mathjax_path = "mathjax/tex-chtml.js"
suppress_warnings = ["myst.header"]
# The first visit has no stored mode: start light (the plots are drawn on white), not "".
html_context = {"default_mode": "light"}
