"""The HTML report's plots: ROC points by hand, and every plot is an inline SVG."""

from derivaudit.report import plots


def test_roc_points_by_hand():
    fpr, tpr = plots.roc_points([3.0, 1.0], [2.0, 0.0])
    # thresholds from the top: 3 (tp), 2 (fp), 1 (tp), 0 (fp)
    assert fpr == [0.0, 0.0, 0.5, 0.5, 1.0] and tpr == [0.0, 0.5, 0.5, 1.0, 1.0]
    fpr, tpr = plots.roc_points([1.0], [1.0])  # a tie moves both at once
    assert fpr == [0.0, 1.0] and tpr == [0.0, 1.0]


def test_long_curves_are_thinned_but_keep_their_ends():
    pos = [i / 1000 for i in range(1000, 3000)]
    neg = [i / 1000 for i in range(0, 2000)]
    fpr, tpr = plots.roc_points(pos, neg, max_points=50)
    assert len(fpr) < 300 and (fpr[0], tpr[0]) == (0.0, 0.0) and (fpr[-1], tpr[-1]) == (1.0, 1.0)


def test_plots_are_inline_svg():
    rows = {"holistic/expanded": [{"score": 1.0, "truth": True}, {"score": -1.0, "truth": False},
                                  {"score": None, "truth": True}, {"score": "inf", "truth": None}]}
    for svg in (plots.distributions(rows), plots.roc(rows),
                plots.per_conversation([{"conversation_id": "c1", "writes": 3, "expanded_supported": 0.5,
                                         "citation_supported": 0.25}]),
                plots.noise_curve({"levels": {"0": {"mean_logodds": 1.0, "admitted_argmax": 1.0},
                                              "2": {"mean_logodds": 0.5, "admitted_argmax": 0.5}}})):
        assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>") and "<path" in svg


def test_untrusted_labels_reach_the_svg_escaped_and_without_warnings(recwarn):
    """Issue 15: a conversation id went raw into SVG text (C0 characters are not XML) and
    matplotlib warned with the raw glyph on stderr; `$` started mathtext."""
    import xml.etree.ElementTree as ET

    conv = "c\x1b]0;pwned\x07\u202e $\\frac{1}{0}$"
    svg = plots.per_conversation([{"conversation_id": conv, "citation_supported": 0.5}])
    svg += plots.bars({conv: 0.3}, "rate") + plots.rate_lines({conv: [(0, 0.5, (0.4, 0.6))]}, "x", "y")
    for raw in ("\x1b", "\x07", "\u202e"):
        assert raw not in svg
    assert "\\u001b" in svg and "frac" in svg
    ET.fromstring(plots.bars({conv: 0.3}, "rate"))  # well-formed XML
    assert not [w for w in recwarn if "Glyph" in str(w.message) or "missing" in str(w.message)]
