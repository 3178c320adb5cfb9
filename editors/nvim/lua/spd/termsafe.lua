-- Showing what agents and runs produced without letting it act.
--
-- An agent chooses its argv, paths and reasons, and a run its output: any
-- of them may hold escape sequences, bidi controls or invisible characters
-- that make what a person reads differ from what runs.  This is a port of
-- client/termsafe.c, so the editor shows such text exactly as spctl does:
--   field(s)   a reason, a summary, a path: controls escaped C-style (\e,
--              \x07, \n), the characters below as \uXXXX, backslash doubled;
--   arg(s)     one argv element quoted as a POSIX shell reads it back;
--   stream()   a run's output: C0 controls but newline and tab in caret
--              notation (^[), C1 controls and the characters below escaped.
-- Neovim draws a buffer's control bytes as ^X itself, but hands bidi
-- controls, zero-width and separator characters to the terminal as they
-- are; both kinds are escaped here before a line reaches a buffer.

local M = {}

-- Blanks shown in a field or an argv element before the rest of a run of
-- them is elided (termsafe.h TS_FIELD_BLANKS_MAX).
M.FIELD_BLANKS_MAX = 16
-- The same for a run's output (TS_STREAM_BLANKS_MAX): padding passes, a
-- flood that would blank a screen does not.
M.STREAM_BLANKS_MAX = 256

-- Code points shown as \uXXXX (termsafe.c escaped_cps): C1 controls, bidi
-- controls, invisible format characters, line/paragraph separators,
-- invisible fillers and variation selectors but U+FE0E/U+FE0F.  Sorted.
local escaped = {
  { 0x0080, 0x009f }, { 0x00ad, 0x00ad }, { 0x034f, 0x034f },
  { 0x0600, 0x0605 }, { 0x061c, 0x061c }, { 0x06dd, 0x06dd },
  { 0x070f, 0x070f }, { 0x0890, 0x0891 }, { 0x08e2, 0x08e2 },
  { 0x115f, 0x1160 }, { 0x17b4, 0x17b5 }, { 0x180b, 0x180f },
  { 0x200b, 0x200f }, { 0x2028, 0x202e }, { 0x2060, 0x206f },
  { 0x3164, 0x3164 }, { 0xfe00, 0xfe0d }, { 0xfeff, 0xfeff },
  { 0xffa0, 0xffa0 }, { 0xfff9, 0xfffb }, { 0x110bd, 0x110bd },
  { 0x110cd, 0x110cd }, { 0x13430, 0x1343f }, { 0x1bca0, 0x1bca3 },
  { 0x1d173, 0x1d17a }, { 0xe0000, 0xe007f }, { 0xe0100, 0xe01ef },
}

-- Unicode space separators, counted with ASCII blanks (blank_cps).
local blanks = {
  { 0x00a0, 0x00a0 }, { 0x1680, 0x1680 }, { 0x2000, 0x200a },
  { 0x202f, 0x202f }, { 0x205f, 0x205f }, { 0x3000, 0x3000 },
}

local function in_ranges(r, cp)
  local lo, hi = 1, #r
  while lo <= hi do
    local mid = math.floor((lo + hi) / 2)
    if cp < r[mid][1] then
      hi = mid - 1
    elseif cp > r[mid][2] then
      lo = mid + 1
    else
      return true
    end
  end
  return false
end

local function utf8_len(c)
  if c >= 0xc2 and c <= 0xdf then
    return 2
  elseif c >= 0xe0 and c <= 0xef then
    return 3
  elseif c >= 0xf0 and c <= 0xf4 then
    return 4
  end
  return 0
end

-- Whether byte c may be byte i (>= 2, 1-based) of a sequence led by lead:
-- well-formed UTF-8 only (Unicode table 3-7), no overlong forms or
-- surrogates, so nothing decodes a character this filter did not see.
local function utf8_ok(lead, i, c)
  if i == 2 and lead == 0xe0 then
    return c >= 0xa0 and c <= 0xbf
  elseif i == 2 and lead == 0xed then
    return c >= 0x80 and c <= 0x9f
  elseif i == 2 and lead == 0xf0 then
    return c >= 0x90 and c <= 0xbf
  elseif i == 2 and lead == 0xf4 then
    return c >= 0x80 and c <= 0x8f
  end
  return c >= 0x80 and c <= 0xbf
end

local function utf8_decode(seq)
  local n = #seq
  -- Arithmetic rather than the bit library: Neovim may be built on PUC
  -- Lua, which has none.
  local span = n == 2 and 0x20 or (n == 3 and 0x10 or 0x08)
  local cp = seq[1] % span
  for i = 2, n do
    cp = cp * 64 + seq[i] % 64
  end
  return cp
end

local STREAM, FIELD, ARG = 1, 2, 3

-- A filter state: out collects pieces, seq a UTF-8 sequence begun, blanks
-- the run of blanks in progress, escaped whether anything was shown other
-- than as it came.
local function new_state(mode)
  return { mode = mode, out = {}, seq = {}, blanks = 0, escaped = false }
end

local function put(st, s)
  st.out[#st.out + 1] = s
end

local function esc(st, s)
  st.escaped = true
  put(st, s)
end

local function blanks_max(st)
  return st.mode == STREAM and M.STREAM_BLANKS_MAX or M.FIELD_BLANKS_MAX
end

local function put_blank(st, s)
  st.blanks = st.blanks + 1
  if st.blanks <= blanks_max(st) then
    put(st, s)
  end
end

local function end_blanks(st)
  if st.blanks > blanks_max(st) then
    esc(st, string.format('\\{%d blanks elided}', st.blanks - blanks_max(st)))
  end
  st.blanks = 0
end

local function put_ascii(st, c)
  if c == 0x20 or (c == 0x09 and st.mode == STREAM) then
    put_blank(st, string.char(c))
    return
  end
  end_blanks(st)
  if st.mode == STREAM then
    -- A buffer line never holds a newline (the caller splits on it); a
    -- carriage return or backspace would only show as ^M or ^H anyway.
    if c == 0x0a or (c >= 0x20 and c < 0x7f) then
      put(st, string.char(c))
    else
      esc(st, '^' .. (c == 0x7f and '?' or string.char(c + 0x40)))
    end
    return
  end
  if c == 0x5c then
    put(st, '\\\\')
  elseif c == 0x27 then
    put(st, st.mode == ARG and "\\'" or "'")
  elseif c == 0x0a then
    esc(st, '\\n')
  elseif c == 0x09 then
    esc(st, '\\t')
  elseif c == 0x0d then
    esc(st, '\\r')
  elseif c == 0x1b then
    esc(st, '\\e')
  elseif c < 0x20 or c == 0x7f then
    esc(st, string.format('\\x%02x', c))
  else
    put(st, string.char(c))
  end
end

local function put_stray(st, bytes)
  end_blanks(st)
  for _, b in ipairs(bytes) do
    if b >= 0x80 and b <= 0x9f then
      esc(st, string.format('\\x%02x', b))
    else
      -- Neither a character nor a C1 control: Neovim shows it as <xx>.
      put(st, string.char(b))
    end
  end
end

local function put_cp(st, seq)
  local cp = utf8_decode(seq)
  local s = string.char(unpack(seq))
  if in_ranges(blanks, cp) then
    put_blank(st, s)
    return
  end
  end_blanks(st)
  if not in_ranges(escaped, cp) then
    put(st, s)
  elseif cp > 0xffff then
    esc(st, string.format('\\U%08x', cp))
  else
    esc(st, string.format('\\u%04x', cp))
  end
end

local function feed(st, c)
  local seq = st.seq
  if #seq > 0 then
    if utf8_ok(seq[1], #seq + 1, c) then
      seq[#seq + 1] = c
      if #seq == utf8_len(seq[1]) then
        put_cp(st, seq)
        st.seq = {}
      end
      return
    end
    put_stray(st, seq)
    st.seq = {}
  end
  if c < 0x80 then
    put_ascii(st, c)
  elseif utf8_len(c) > 0 then
    st.seq[#st.seq + 1] = c
  else
    put_stray(st, { c })
  end
end

local function feed_string(st, s)
  for i = 1, #s do
    feed(st, s:byte(i))
  end
end

local function finish(st)
  if #st.seq > 0 then
    put_stray(st, st.seq)
  end
  st.seq = {}
  end_blanks(st)
end

local function take(st)
  local s = table.concat(st.out)
  st.out = {}
  return s
end

local function filter(s, mode)
  local st = new_state(mode)
  feed_string(st, s)
  finish(st)
  return take(st), st.escaped
end

--- One field of a line (a reason, a path, a summary), escaped to stay on
--- its line and read unambiguously.  nil and vim.NIL show as "(null)".
function M.field(s)
  if s == nil or s == vim.NIL then
    s = '(null)'
  elseif type(s) ~= 'string' then
    s = tostring(s)
  end
  return (filter(s, FIELD))
end

local SAFE = '^[%w_@%%+=:,./-]+$'

--- One argv element quoted as a POSIX shell would read it back: bare when
--- only safe characters, '...' otherwise, $'...' with C-style escapes when
--- anything in it had to be escaped.
function M.arg(s)
  if type(s) ~= 'string' then
    return "''"
  end
  if s:find(SAFE) then
    return s
  end
  local shown, escaped_any = filter(s, ARG)
  if escaped_any then
    return "$'" .. shown .. "'"
  end
  return "'" .. (s:gsub("'", "'\\''")) .. "'"
end

--- An argv list shell-quoted, elements joined by a space.
function M.argv(list)
  local out = {}
  if type(list) == 'table' then
    for i, a in ipairs(list) do
      out[i] = M.arg(a)
    end
  end
  return table.concat(out, ' ')
end

--- A run's output as it streams: returns a filter with :write(chunk)
--- giving the escaped text so far and :finish() the rest.  Chunks may
--- split a UTF-8 sequence or a run of blanks anywhere.
function M.stream()
  local st = new_state(STREAM)
  return {
    write = function(_, chunk)
      feed_string(st, chunk)
      return take(st)
    end,
    finish = function(_)
      finish(st)
      return take(st)
    end,
  }
end

--- Text (a diff, a whole output) escaped as a stream and split into lines
--- for a buffer.
function M.lines(text)
  local f = M.stream()
  local s = f:write(text or '') .. f:finish()
  return vim.split(s, '\n', { plain = true })
end

return M
