package mm2spec.spark;

import java.util.Map;

/** The little JSON the writer sends back to the driver (one short line per partition and task). */
final class Json {
    private Json() {
    }

    static String quote(String text) {
        StringBuilder out = new StringBuilder(text.length() + 2).append('"');
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }

    /** Numbers only; NaN and infinities (a producer metric with no samples yet) become null. */
    static String numbers(Map<String, Double> values) {
        StringBuilder out = new StringBuilder("{");
        for (Map.Entry<String, Double> entry : values.entrySet()) {
            double value = entry.getValue();
            out.append(out.length() > 1 ? "," : "").append(quote(entry.getKey())).append(':')
               .append(Double.isFinite(value) ? Double.toString(value) : "null");
        }
        return out.append('}').toString();
    }
}
