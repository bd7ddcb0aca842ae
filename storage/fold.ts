// The one case fold of literal search, shared by the search code and the trigram index (which
// indexes folded text through the albedo_fold SQL function, registered on every writer).

// eslint-disable-next-line no-control-regex -- the ASCII range starts at NUL on purpose
const ASCII = /^[\x00-\x7f]*$/;

/**
 * NFC, then Unicode lower case. A pattern matches a row when fold(row text) contains
 * fold(pattern). This is lower-casing, not full case folding: 'ÉCOLE' finds 'école', but
 * 'straße' does not find 'STRASSE'.
 */
export function fold(s: string): string {
  // NFC leaves ASCII as it is, and normalizing is the expensive half.
  return ASCII.test(s) ? s.toLowerCase() : s.normalize('NFC').toLowerCase();
}
