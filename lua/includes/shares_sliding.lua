-- include "shares_sliding": weighted regional shares over a sliding window (sliding_window_counter), in
-- the counter's share ledger (KEYS[3]). Included by "shares", whose share_cap, share_count and
-- share_report hand over to these once the script has called share_slide_at (docs/distribution.md
-- "Weighted regional shares").
--
-- The window slides, so each region's use is estimated as the counter estimates its total: the
-- sub-windows (buckets) inside the window count fully, the one sliding out in proportion to the part
-- still covered. The ledger keeps, per bucket index i, c:<i> (units taken from the common share, by
-- every region), g:<i>:<region> (units of the region's guarantee) and o:<i>:<region> (units it took from
-- the common share), and x = its expire-at. A region's take gets at most what the estimate leaves of its
-- guarantee plus what it leaves of the common share, both rounded down: in integer math, every estimate
-- scaled by bucket_ms. Units go back only to the current bucket (a give names it), to the common share
-- first. A region's use as reported: its guaranteed use rounded up plus its common use rounded down, so
-- the report never shows a region more room in its guarantee than it has.
-- Port of src/counters/shares-sliding.ts: change both together.

-- {current bucket index, sub-window count, bucket ms, ms elapsed in the current bucket}; nil: a window.
local slide = nil

-- Defined only for a region's lease operation with a share: every other call of the script is spared
-- making them (a call of a script makes every function it defines).
local share_slide_at, slide_place, slide_scaled, slide_ledger, slide_use, slide_room, slide_cap, slide_count, slide_report
if share_region then
  function share_slide_at(current, sub_windows, bucket_ms, elapsed)
    slide = { current = current, sub_windows = sub_windows, bucket_ms = bucket_ms, elapsed = elapsed }
  end

  -- Where bucket `index` stands: 'full' inside the window, 'oldest' sliding out of it, nil once gone.
  function slide_place(index)
    if index < slide.current - slide.sub_windows then
      return nil
    end
    if index == slide.current - slide.sub_windows then
      return 'oldest'
    end
    return 'full'
  end

  -- A use estimate scaled by bucket_ms, as the counter's: its full buckets' units and the oldest's.
  function slide_scaled(full, oldest)
    return full * slide.bucket_ms + oldest * (slide.bucket_ms - slide.elapsed)
  end

  -- The live ledger, flat (HGETALL), or {} when absent or expired.
  function slide_ledger()
    local flat = redis.call('HGETALL', share_key)
    for i = 1, #flat, 2 do
      if flat[i] == 'x' and tonumber(flat[i + 1]) <= now then
        return {}
      end
    end
    return flat
  end

  -- The scaled estimates of the region's guaranteed use and of the common share's use.
  function slide_use(flat)
    local own = { full = 0, oldest = 0 }
    local common = { full = 0, oldest = 0 }
    for i = 1, #flat, 2 do
      local kind, index, name = string.match(flat[i], '^([gc]):(%-?%d+):?(.*)$')
      local place = kind and slide_place(tonumber(index))
      if place and kind == 'c' then
        common[place] = common[place] + tonumber(flat[i + 1])
      elseif place and name == share_region then
        own[place] = own[place] + tonumber(flat[i + 1])
      end
    end
    return slide_scaled(own.full, own.oldest), slide_scaled(common.full, common.oldest)
  end

  -- What the region may take now, of its guarantee and of the common share.
  function slide_room()
    local own, common = slide_use(slide_ledger())
    local b = slide.bucket_ms
    return math.max(0, math.floor((share_own * b - own) / b)), math.max(0, math.floor((share_common * b - common) / b))
  end

  function slide_cap(want)
    local own_room, common_room = slide_room()
    share_room = own_room + common_room
    return math.min(want, share_room)
  end

  -- Counts `units` taken (a give: `-units`) by the region in the current bucket.
  function slide_count(units)
    if units == 0 then
      return
    end
    local own_room = slide_room()
    local flat = slide_ledger()
    if #flat == 0 then
      redis.call('DEL', share_key)
    end
    -- Buckets that left the window go.
    local stale = {}
    for i = 1, #flat, 2 do
      local index = string.match(flat[i], '^[gco]:(%-?%d+)')
      if index and not slide_place(tonumber(index)) then
        stale[#stale + 1] = flat[i]
      end
    end
    for i = 1, #stale, 500 do
      redis.call('HDEL', share_key, unpack(stale, i, math.min(i + 499, #stale)))
    end
    local at = fmt(slide.current)
    local g_field, o_field, c_field = 'g:' .. at .. ':' .. share_region, 'o:' .. at .. ':' .. share_region, 'c:' .. at
    local v = redis.call('HMGET', share_key, g_field, o_field, c_field)
    local g, o, c = tonumber(v[1]) or 0, tonumber(v[2]) or 0, tonumber(v[3]) or 0
    if units > 0 then
      local own = math.min(units, own_room)
      g = g + own
      o = o + (units - own)
      c = c + (units - own)
    else
      local back = -units
      local common = math.min(back, o)
      o = o - common
      c = c - common
      g = math.max(0, g - (back - common))
    end
    local expire_at = (slide.current + slide.sub_windows + 1) * slide.bucket_ms
    redis.call('HSET', share_key, g_field, fmt(g), o_field, fmt(o), c_field, fmt(c), 'x', fmt(expire_at))
    expire_in(share_key, expire_at)
  end

  -- Every region's use of the window, "<region>=<units>" by name, comma-separated ('' for none).
  function slide_report()
    local flat = slide_ledger()
    local use, names = {}, {}
    for i = 1, #flat, 2 do
      local kind, index, name = string.match(flat[i], '^([go]):(%-?%d+):(.+)$')
      local place = kind and slide_place(tonumber(index))
      if place then
        if not use[name] then
          use[name] = { g = { full = 0, oldest = 0 }, o = { full = 0, oldest = 0 } }
          names[#names + 1] = name
        end
        use[name][kind][place] = use[name][kind][place] + tonumber(flat[i + 1])
      end
    end
    table.sort(names)
    local parts = {}
    local b = slide.bucket_ms
    for i = 1, #names do
      local u = use[names[i]]
      local own = math.ceil(slide_scaled(u.g.full, u.g.oldest) / b)
      parts[i] = names[i] .. '=' .. fmt(own + math.floor(slide_scaled(u.o.full, u.o.oldest) / b))
    end
    return table.concat(parts, ',')
  end
end
