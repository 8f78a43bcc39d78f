// The course's additions to nbgrader's Manage Submissions page (manage_submissions.js, loaded
// before this file): a Flags column with each submission's flags and their reasons, and
// learners' names as the gradebook knows them, else their ids (never "None, None"); each copy
// flag links to the learner's pairs in the chapter's class report of copy detection.
var COPY_FLAGS = ["copied_reference", "similar_submissions"];

// The chapter's class report of copy detection, served by the course's formgrader.
var reportUrl = function () {
    return base_url + "/formgrader/course/similarity/" + encodeURIComponent(assignment_id)
        + ".html";
};

(function () {
    var nbgraderInsertRow = insertRow;
    insertRow = function (table) {
        var row = nbgraderInsertRow(table);
        row.append($("<td/>").addClass("flags"));
        return row;
    };

    var displayName = function (model) {
        var parts = [model.get("last_name"), model.get("first_name")].filter(function (part) {
            return part !== null && part !== undefined && part !== "";
        });
        return parts.length ? parts.join(", ") : model.get("student");
    };

    var nbgraderRender = SubmissionUI.prototype.render;
    SubmissionUI.prototype.render = function () {
        nbgraderRender.apply(this, arguments);
        var name = displayName(this.model);
        var link = this.$student_name.find("a");
        (link.length ? link : this.$student_name).text(name);
        this.$student_name.attr("data-order", name);

        var cell = this.$el.find(".flags").empty();
        var flags = this.model.get("flags") || [];
        cell.attr("data-order", flags.length);
        if (!flags.length) {
            cell.append($("<span/>").addClass("text-muted").text("none"));
            return;
        }
        var list = $("<ul/>").addClass("course-flags");
        var self = this;
        flags.forEach(function (flag) {
            var item = $("<li/>").append($("<span/>").addClass("label label-danger").text(flag.code));
            if (flag.cell) {
                item.append(" ").append($("<code/>").text(flag.cell));
            }
            item.append(" ").append($("<span/>").addClass("reason").text(flag.reason));
            if (COPY_FLAGS.indexOf(flag.code) >= 0) {
                item.append(" ").append($("<a/>").attr("target", "_blank").attr("href",
                    reportUrl() + "#learner-" + encodeURIComponent(self.model.get("student")))
                    .text("see the pair in the report"));
            }
            list.append(item);
        });
        cell.append(list);
    };
})();
