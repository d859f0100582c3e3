"""The console's two languages: its words in Arabic, and numbers, money and times written as
each language writes them. English is the text in the templates; a word without an Arabic
entry shows in English rather than not at all."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

LANGUAGES = ("en", "ar")
LANGUAGE_COOKIE = "units_console_lang"
_ARABIC_DIGITS = str.maketrans("0123456789,.", "٠١٢٣٤٥٦٧٨٩٬٫")

ARABIC: dict[str, str] = {
    "Units": "الوحدات",
    "Units console": "لوحة الوحدات",
    "Sign in": "تسجيل الدخول",
    "Sign out": "تسجيل الخروج",
    "API key": "مفتاح الواجهة",
    "Your session ended; sign in again.": "انتهت جلستك؛ سجّل الدخول من جديد.",
    "That key was not accepted.": "لم يُقبل هذا المفتاح.",
    "Too many sign-in attempts; wait a minute.": "محاولات دخول كثيرة؛ انتظر دقيقة.",
    "The form expired; try again.": "انتهت صلاحية النموذج؛ حاول مرة أخرى.",
    "Search": "بحث",
    "Search in English or Arabic": "ابحث بالعربية أو الإنجليزية",
    "Filter": "تصفية",
    "Filters": "عوامل التصفية",
    "Apply": "تطبيق",
    "Clear": "مسح",
    "City": "المدينة",
    "Type": "النوع",
    "Publishing": "النشر",
    "Availability": "التوفر",
    "Min price": "أدنى سعر",
    "Max price": "أعلى سعر",
    "Map box (west, south, east, north)": "مربع الخريطة (غرب، جنوب، شرق، شمال)",
    "Raw filter (RSQL)": "تصفية مباشرة (RSQL)",
    "Sort by": "ترتيب حسب",
    "Order": "الاتجاه",
    "Newest first": "الأحدث أولاً",
    "Oldest first": "الأقدم أولاً",
    "Descending": "تنازلي",
    "Ascending": "تصاعدي",
    "Any": "الكل",
    "Name": "الاسم",
    "Price": "السعر",
    "Status": "الحالة",
    "Updated": "آخر تعديل",
    "Previous": "السابق",
    "Next": "التالي",
    "Page": "صفحة",
    "of": "من",
    "about": "نحو",
    "units": "وحدة",
    "No units match.": "لا توجد وحدات مطابقة.",
    "Map of the results": "خريطة النتائج",
    "Drag on the map to filter by a box.": "اسحب على الخريطة للتصفية بمربع.",
    "No unit of this page has a location.": "لا توجد وحدة في هذه الصفحة لها موقع.",
    "New unit": "وحدة جديدة",
    "Edit": "تعديل",
    "Save": "حفظ",
    "Cancel": "إلغاء",
    "History": "السجل",
    "Version": "الإصدار",
    "When": "متى",
    "Who": "من",
    "Action": "الإجراء",
    "Changes": "التغييرات",
    "Field": "الحقل",
    "From": "من",
    "To": "إلى",
    "Actions": "الإجراءات",
    "Publish": "نشر",
    "Unpublish": "إلغاء النشر",
    "Schedule": "جدولة",
    "Archive": "أرشفة",
    "Restore": "استعادة",
    "Reserve": "حجز",
    "Release": "إلغاء الحجز",
    "by default": "افتراضيًا",
    "Sell": "بيع",
    "Block": "إيقاف",
    "Unblock": "إعادة الإتاحة",
    "At": "في",
    "Until": "حتى",
    "Channels (comma separated)": "القنوات (مفصولة بفواصل)",
    "Add a row": "إضافة صف",
    "Remove": "حذف",
    "Changed by someone else since you opened it.": "غيّرها شخص آخر منذ أن فتحتها.",
    "See the new version": "عرض الإصدار الجديد",
    "Some fields need attention.": "بعض الحقول تحتاج إلى مراجعة.",
    "Saved.": "تم الحفظ.",
    "Done.": "تم.",
    "Not found.": "غير موجود.",
    "Something went wrong; try again.": "حدث خطأ؛ حاول مرة أخرى.",
    "You may not do this with this key.": "لا يسمح مفتاحك بهذا.",
    "Bulk change": "تعديل جماعي",
    "Units matching": "الوحدات المطابقة",
    "Preview": "معاينة",
    "would change": "ستتغير",
    "changed": "تغيرت",
    "Set price to": "تعيين السعر إلى",
    "Set city to": "تعيين المدينة إلى",
    "Set type to": "تعيين النوع إلى",
    "Apply to all": "تطبيق على الكل",
    "Exports": "التصدير",
    "Imports": "الاستيراد",
    "Webhooks": "الويب هوك",
    "API keys": "مفاتيح الواجهة",
    "Language": "اللغة",
    "Location": "الموقع",
    "Longitude": "خط الطول",
    "Latitude": "خط العرض",
    "Details": "التفاصيل",
    "Created": "أُنشئت",
    "Yes": "نعم",
    "No": "لا",
    "Skip to content": "انتقل إلى المحتوى",
    "Main": "الرئيسية",
    "Read only": "قراءة فقط",
    "Format": "الصيغة",
    "Per page": "لكل صفحة",
    "Not ready yet; try again in a moment.": "ليس جاهزاً بعد؛ حاول بعد قليل.",
    "This file is no longer kept.": "لم يعد هذا الملف محفوظاً.",
    "Too many requests; wait a moment.": "طلبات كثيرة؛ انتظر قليلاً.",
    "The service is busy; try again shortly.": "الخدمة مشغولة؛ حاول بعد قليل.",
    "line": "سطر",
    "Created with the values it was sent.": "أُنشئت بالقيم التي أُرسلت بها.",
    "Older changes": "تغييرات أقدم",
    "west": "غرب",
    "south": "جنوب",
    "east": "شرق",
    "north": "شمال",
    "Compression": "الضغط",
    "Rows": "الصفوف",
    "Nothing yet.": "لا شيء بعد.",
    "Fields (comma separated, empty for all)": "الحقول (مفصولة بفواصل، فارغة للكل)",
    "Start the export": "ابدأ التصدير",
    "Recent exports": "أحدث عمليات التصدير",
    "Recent imports": "أحدث عمليات الاستيراد",
    "Export": "تصدير",
    "Import": "استيراد",
    "Dry run": "تجربة",
    "Dry run (write nothing)": "تجربة (دون كتابة أي شيء)",
    "All or nothing": "الكل أو لا شيء",
    "Mode": "الطريقة",
    "create": "إنشاء",
    "upsert": "إنشاء أو تحديث",
    "Upload": "رفع",
    "File (csv, jsonl, xlsx)": "الملف (csv أو jsonl أو xlsx)",
    "Choose a csv, jsonl or xlsx file (gzip allowed).": "اختر ملف csv أو jsonl أو xlsx (يُقبل gzip).",
    "Try a file with a dry run first: it reports what would be created, updated and left unchanged, and every row error, and writes nothing. Then choose the file again and import it.": "جرّب الملف أولاً دون كتابة: يبيّن ما سيُنشأ وما سيُحدَّث وما سيبقى كما هو، وكل خطأ في الصفوف. ثم اختر الملف مرة أخرى واستورده.",
    "This page looks again every few seconds.": "تتحدث هذه الصفحة كل بضع ثوانٍ.",
    "Refresh": "تحديث",
    "Finished": "انتهت",
    "Size (bytes)": "الحجم (بايت)",
    "Kept until": "محفوظ حتى",
    "Rows fine": "صفوف سليمة",
    "Rows failed": "صفوف بها أخطاء",
    "Rows created": "صفوف أُنشئت",
    "Rows updated": "صفوف حُدّثت",
    "Rows unchanged": "صفوف لم تتغير",
    "Would be created": "ستُنشأ",
    "Would be updated": "ستُحدَّث",
    "Download": "تنزيل",
    "Row errors": "أخطاء الصفوف",
    "Row": "الصف",
    "Message": "الرسالة",
    "Import it for real": "استورده فعلياً",
    "Events": "الأحداث",
    "All events": "كل الأحداث",
    "Enabled": "مفعّل",
    "Disabled": "معطّل",
    "Enable": "تفعيل",
    "Disable": "تعطيل",
    "Delete": "حذف",
    "Description": "الوصف",
    "New webhook": "ويب هوك جديد",
    "Create the webhook": "أنشئ الويب هوك",
    "Webhook": "الويب هوك",
    "Webhook created. Its signing secret is shown this once:": "أُنشئ الويب هوك. يظهر سر التوقيع هذه المرة فقط:",
    "The new signing secret, shown this once. For 24 hours both secrets sign every delivery.": "سر التوقيع الجديد، يظهر هذه المرة فقط. لمدة ٢٤ ساعة يوقّع السرّان كل إرسال.",
    "Send a test ping": "أرسل اختباراً",
    "Test ping": "اختبار",
    "Rotate the secret": "غيّر السر",
    "Delivery log": "سجل الإرسال",
    "Event": "الحدث",
    "Attempts": "المحاولات",
    "Last attempt": "آخر محاولة",
    "Answer": "الرد",
    "Redeliver": "أعد الإرسال",
    "Status code": "رمز الحالة",
    "Error": "الخطأ",
    "pending": "قيد الانتظار",
    "Key issued. Its secret is shown this once; keep it now:": "أُصدر المفتاح. يظهر سره هذه المرة فقط؛ احفظه الآن:",
    "Prefix": "البادئة",
    "Scopes": "الصلاحيات",
    "Policy": "السياسة",
    "Policy (RSQL)": "السياسة (RSQL)",
    "Last used": "آخر استخدام",
    "Revoked": "ملغى",
    "Active": "فعّال",
    "Revoke": "إلغاء",
    "New key": "مفتاح جديد",
    "Rate limit (e.g. 600/minute)": "حد الطلبات (مثلاً 600/minute)",
    "Expires (UTC)": "ينتهي (UTC)",
    "Issue the key": "أصدر المفتاح",
    "queued": "في الانتظار",
    "running": "قيد التنفيذ",
    "succeeded": "نجحت",
    "failed": "فشلت",
    "expired": "انتهت صلاحيتها",
    "Display names": "أسماء العرض",
    "How a value of a unit's field is shown on English and Arabic pages. A value without names is shown as it is; a built-in name may be replaced, and comes back when its replacement is deleted.": "كيف تظهر قيمة حقل الوحدة في الصفحات الإنجليزية والعربية. تظهر القيمة التي ليس لها اسم كما هي؛ ويمكن استبدال الاسم المدمج، ويعود عند حذف بديله.",
    "Set display names": "تعيين أسماء العرض",
    "Value": "القيمة",
    "English name": "الاسم بالإنجليزية",
    "Arabic name": "الاسم بالعربية",
    "English": "الإنجليزية",
    "Arabic": "العربية",
    "Source": "المصدر",
    "Built-in": "مدمج",
    "Replaces the built-in": "يحل محل المدمج",
    "Added": "أُضيف",
    "Reset to built-in": "العودة إلى المدمج",
    "must not be blank": "يجب ألا يكون فارغاً",
}

# The unit's fields as a person reads them: English, Arabic. The field's own name stays in the
# page too (a label's `title`), as the API, the filters and the spreadsheets spell it.
FIELD_LABELS: dict[str, tuple[str, str]] = {
    "name": ("Name", "الاسم"),
    "type": ("Type", "النوع"),
    "location": ("Location", "الموقع"),
    "price": ("Price", "السعر"),
    "surface": ("Surface", "المساحة"),
    "guaranty": ("Guaranty", "الضمان"),
    "city": ("City", "المدينة"),
    "subProjectId": ("Sub-project", "المشروع الفرعي"),
    "priceBase": ("Price basis", "أساس السعر"),
    "unitImageUrl": ("Image", "الصورة"),
    "unitNameAr": ("Name (Arabic)", "الاسم بالعربية"),
    "startingPrice": ("Starting price", "السعر الابتدائي"),
    "maxPrice": ("Maximum price", "أعلى سعر"),
    "unitDesc": ("Description", "الوصف"),
    "unitDescAr": ("Description (Arabic)", "الوصف بالعربية"),
    "unitShortDesc": ("Short description", "وصف مختصر"),
    "unitShortDescAr": ("Short description (Arabic)", "وصف مختصر بالعربية"),
    "unitLocation": ("Map location", "الموقع على الخريطة"),
    "expense": ("Expense", "المصروفات"),
    "expense.name": ("Expense", "المصروفات"),
    "expense.value": ("Expense amount", "قيمة المصروفات"),
    "gallery": ("Gallery", "معرض الصور"),
    "specs": ("Features", "المواصفات"),
    "options": ("Options", "الخيارات"),
    "paymentPlans": ("Payment plans", "خطط السداد"),
    "floorsPlan": ("Floors", "الأدوار"),
    "readings": ("Meter readings", "قراءات العدادات"),
    "featureNumber": ("No.", "رقم"),
    "featureType": ("Type", "النوع"),
    "featureImage": ("Image", "الصورة"),
    "featureDesc": ("Description", "الوصف"),
    "featureDescAr": ("Description (Arabic)", "الوصف بالعربية"),
    "featureTag": ("Tag", "الوسم"),
    "active": ("Active", "مفعّل"),
    "optionNumber": ("No.", "رقم"),
    "optionName": ("Name", "الاسم"),
    "optionNameAr": ("Name (Arabic)", "الاسم بالعربية"),
    "area": ("Area", "المساحة"),
    "uom": ("Unit", "وحدة القياس"),
    "planNumber": ("No.", "رقم"),
    "planName": ("Name", "الاسم"),
    "planNameAr": ("Name (Arabic)", "الاسم بالعربية"),
    "planDesc": ("Description", "الوصف"),
    "planDescAr": ("Description (Arabic)", "الوصف بالعربية"),
    "minPrice": ("Minimum price", "أدنى سعر"),
    "default": ("Default", "افتراضية"),
    "downPayment": ("Down payment", "الدفعة المقدمة"),
    "installmentsValue": ("Installment", "قيمة القسط"),
    "paymentDetails": ("Details", "التفاصيل"),
    "floorsNumber": ("Floor", "الدور"),
    "floorName": ("Name", "الاسم"),
    "floorNameAr": ("Name (Arabic)", "الاسم بالعربية"),
    "floorDesc": ("Description", "الوصف"),
    "floorDescAr": ("Description (Arabic)", "الوصف بالعربية"),
    "rooms": ("Rooms", "الغرف"),
    "baths": ("Baths", "الحمامات"),
    "view": ("View", "الإطلالة"),
    "extras": ("Extras", "إضافات"),
    "floorImage": ("Plan image", "صورة المخطط"),
    "service": ("Service", "الخدمة"),
    "currentReading": ("Current reading", "القراءة الحالية"),
    "previousReading": ("Previous reading", "القراءة السابقة"),
    "cost": ("Cost", "التكلفة"),
    "readingDate": ("Date", "التاريخ"),
    "Notes": ("Notes", "ملاحظات"),
    "currency": ("Currency", "العملة"),
    "country": ("Country", "الدولة"),
    "offeringType": ("Offered for", "نوع العرض"),
    "bedrooms": ("Bedrooms", "غرف النوم"),
    "bathrooms": ("Bathrooms", "الحمامات"),
    "completionStatus": ("Completion", "حالة الإنشاء"),
    "handoverDate": ("Handover date", "موعد التسليم"),
}

# The values of the unit's fields that are choices: English, Arabic.
CHOICE_WORDS: dict[str, tuple[str, str]] = {
    "sale": ("Sale", "بيع"),
    "rent": ("Rent", "إيجار"),
    "ready": ("Ready", "جاهزة للتسليم"),
    "offPlan": ("Off-plan", "قيد الإنشاء"),
}

STATUS_WORDS = {
    "draft": "مسودة",
    "scheduled": "مجدولة",
    "published": "منشورة",
    "unpublished": "غير منشورة",
    "archived": "مؤرشفة",
    "available": "متاحة",
    "reserved": "محجوزة",
    "sold": "مباعة",
    "blocked": "موقوفة",
}
ARABIC.update(STATUS_WORDS)


@dataclass(frozen=True, slots=True)
class Language:
    code: str

    @property
    def direction(self) -> str:
        return "rtl" if self.code == "ar" else "ltr"

    @property
    def other(self) -> str:
        return "en" if self.code == "ar" else "ar"

    def t(self, text: str) -> str:
        if self.code == "ar":
            return ARABIC.get(text, text)
        return text

    def field(self, name: str) -> str:
        """A field's label in this language (its API name when it has none)."""
        labels = FIELD_LABELS.get(name)
        if labels is None:
            return name
        return labels[1] if self.code == "ar" else labels[0]

    def choice(self, value: str | None) -> str:
        """A choice field's value in words (the value itself when it has none)."""
        if value is None:
            return ""
        words = CHOICE_WORDS.get(value)
        if words is None:
            return value
        return words[1] if self.code == "ar" else words[0]

    def number(self, value: object) -> str:
        """A number grouped by thousands, exactly as stored (no float on the way)."""
        if value is None or value == "":
            return ""
        if isinstance(value, bool):
            return self.t("Yes" if value else "No")
        text = f"{value:,}" if isinstance(value, int | Decimal) else str(value)
        return text.translate(_ARABIC_DIGITS) if self.code == "ar" else text

    def time(self, value: str | None) -> str:
        """A server time (RFC 3339) as a short UTC date and time."""
        if not value:
            return ""
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value
        text = moment.strftime("%Y-%m-%d %H:%M UTC")
        return text.translate(_ARABIC_DIGITS) if self.code == "ar" else text


def choose(cookie: str | None, accept_language: str | None) -> Language:
    """The cookie's language, else Arabic when the browser asks for it first, else English."""
    if cookie in LANGUAGES:
        return Language(cookie)
    first = (accept_language or "").split(",")[0].strip().lower()
    return Language("ar" if first.startswith("ar") else "en")
